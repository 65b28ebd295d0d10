device read MB/s 0, write MB/s 57
consumed over the same ~20 s: -nan msg/s (-nan MB/s)
