device read MB/s 0, write MB/s 65
consumed over the same ~20 s: 47737 msg/s (50 MB/s)
