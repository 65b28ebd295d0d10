device read MB/s 79, write MB/s 86
consumed over the same ~20 s: 20769 msg/s (22 MB/s)
