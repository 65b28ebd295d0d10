device read MB/s 61, write MB/s 55
consumed over the same ~20 s: 4866 msg/s (5 MB/s)
