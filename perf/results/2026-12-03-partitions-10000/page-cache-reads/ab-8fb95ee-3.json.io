device read MB/s 0, write MB/s 58
consumed over the same ~20 s: -nan msg/s (-nan MB/s)
