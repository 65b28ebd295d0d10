device read MB/s 12, write MB/s 59
consumed over the same ~20 s: -nan msg/s (-nan MB/s)
