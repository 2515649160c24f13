package io.jumpgate.spark
object Probe { def x: Int = io.jumpgate.spark.ntf.Le.i32(new Array[Byte](4), 0) }
