device read MB/s 103, write MB/s 58
consumed over the same ~20 s: -nan msg/s (-nan MB/s)
