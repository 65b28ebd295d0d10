device read MB/s 46, write MB/s 124
consumed over the same ~20 s: 0 msg/s (0 MB/s)
