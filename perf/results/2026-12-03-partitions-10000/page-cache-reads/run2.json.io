device read MB/s 0, write MB/s 57
consumed over the same ~20 s: 37881 msg/s (40 MB/s)
