device read MB/s 0, write MB/s 77
consumed over the same ~20 s: 48118 msg/s (51 MB/s)
