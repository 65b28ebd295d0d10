device read MB/s 94, write MB/s 157
consumed over the same ~20 s: 13698 msg/s (14 MB/s)
