package io.jumpgate.spark.receive

import java.io.{EOFException, IOException, InputStream}
import java.net.{InetAddress, InetSocketAddress, ServerSocket, Socket, SocketTimeoutException}
import java.nio.charset.StandardCharsets
import java.util.concurrent.{ConcurrentHashMap, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong, AtomicReference}

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import io.jumpgate.spark.ntf.Le

import org.apache.spark.internal.Logging

/**
 * Frames of one stream, as received: chunks of `[u32 length][tuple]` frames (contract section 3).
 * A frame never straddles two chunks, so decoders walk each chunk without copying.
 */
final class Chunk(val bytes: Array[Byte], val end: Int, val tuples: Int)

/** One NTF stream, complete and checked (header, lengths, end marker and count). */
final class StreamData(val id: Int, val chunks: IndexedSeq[Chunk], val tuples: Long, val bytes: Long)

/**
 * The executor-side receiver service: one per JVM. It listens on behalf of Spark tasks.
 *
 * A Jumpgate job's output destination (one `send`, one Spark partition) gets its own listening
 * socket, opened before the job is submitted (the request carries its port). Its streams are
 * accepted and read by the service's own threads as soon as senders connect, and buffered in
 * memory per (job, destination) until the task of that partition reads them. Buffering decouples
 * the job from Spark's task scheduling: the job runs to completion while no task slot is held, and
 * a job that fails at any point is discarded whole before Spark sees a row, so the subtree can run
 * in Spark instead (never a partial answer).
 *
 * Limits: the buffered bytes of all destinations are capped (spark.jumpgate.receiver.maxBufferBytes);
 * a destination over the cap fails, and with it the job, which then falls back to Spark.
 */
final class ReceiverService extends Logging {
  private val destinations = new ConcurrentHashMap[(String, Int), Destination]()
  private[receive] val buffered = new AtomicLong()
  private val threadIds = new AtomicInteger()

  /** Open `n` listening sockets for job `key` on `host`; their ports, in destination order. */
  def open(key: String, n: Int, host: String, maxBytes: Long): Seq[Int] = {
    val opened = ArrayBuffer[Destination]()
    try {
      for (i <- 0 until n) {
        val server = new ServerSocket()
        try {
          server.setReuseAddress(true)
          server.setReceiveBufferSize(4 << 20)
          server.bind(new InetSocketAddress(InetAddress.getByName(host), 0), 64)
        } catch { case e: IOException => server.close(); throw e }
        val d = new Destination(this, key, i, server, maxBytes)
        destinations.put((key, i), d)
        opened += d
        d.startAccepting()
      }
      opened.map(_.port).toSeq
    } catch {
      case e: Throwable => opened.foreach(_.close()); opened.foreach(d => destinations.remove((key, d.index))); throw e
    }
  }

  def destination(key: String, i: Int): Option[Destination] = Option(destinations.get((key, i)))

  /** Tell destinations how many streams to expect and their tuples' fixed size (known once the job
   *  is compiled; a shorter tuple breaks its stream). */
  def expect(key: String, expected: Seq[Int], fixedSizes: Seq[Int]): Unit =
    expected.zip(fixedSizes).zipWithIndex.foreach { case ((n, fs), i) => destination(key, i).foreach(_.expect(n, fs)) }

  /** The first failure among the job's destinations. */
  def failure(key: String): Option[String] =
    destinationsOf(key).flatMap(_.failure).headOption

  /** Wait until every destination of the job is complete or one failed; true when all complete. */
  def await(key: String, timeoutMs: Long): Boolean = {
    val deadline = System.nanoTime() + timeoutMs * 1000000L
    destinationsOf(key).forall { d =>
      val left = math.max(0L, deadline - System.nanoTime())
      d.await(left) && d.failure.isEmpty
    }
  }

  def destinationsOf(key: String): Seq[Destination] =
    destinations.asScala.collect { case ((k, _), d) if k == key => d }.toSeq.sortBy(_.index)

  /** Drop a job's destinations: close sockets, stop readers, free buffers. Idempotent. */
  def release(key: String): Unit = destinationsOf(key).foreach { d =>
    destinations.remove((key, d.index))
    d.close()
  }

  /** Drop one destination once its partition was read. */
  def release(key: String, index: Int): Unit = Option(destinations.remove((key, index))).foreach(_.close())

  def openDestinations: Int = destinations.size
  def bufferedBytes: Long = buffered.get

  private[receive] def thread(name: String)(body: => Unit): Thread = {
    val t = new Thread(() => body, s"jumpgate-$name-${threadIds.incrementAndGet()}")
    t.setDaemon(true)
    t.start()
    t
  }
}

object ReceiverService {
  lazy val get: ReceiverService = new ReceiverService
  val HeaderMagic: Array[Byte] = "NTF1".getBytes(StandardCharsets.US_ASCII)
  val ChunkSize: Int = 4 << 20
  val FirstChunkSize: Int = 64 << 10
  val PollMs = 200
  /** A connection that has not sent its 8-byte header within this time is not a stream of ours. */
  val HeaderTimeoutMs = 10000
}

/** One `send` destination: a listening socket, its streams, their buffers. */
final class Destination(service: ReceiverService, val key: String, val index: Int, server: ServerSocket,
                        maxBytes: Long) extends Logging {
  import ReceiverService._

  val port: Int = server.getLocalPort
  @volatile private var expected = -1
  @volatile private var fixedSize = 1
  private val expectedSet = new CountDownLatch(1)
  private val done = new CountDownLatch(1)
  private val error = new AtomicReference[String](null)
  @volatile private var closed = false
  private val streams = new ConcurrentHashMap[Int, StreamData]()
  private val sockets = ConcurrentHashMap.newKeySet[Socket]()
  private val threads = ConcurrentHashMap.newKeySet[Thread]()
  /** Stream ids whose senders presented a valid header; the listener closes once all are in. */
  private val claimed = ConcurrentHashMap.newKeySet[Integer]()
  private val myBytes = new AtomicLong()
  /** Tasks that have read this destination: Spark may compute a partition more than once. */
  val reads = new AtomicInteger()

  def failure: Option[String] = Option(error.get)
  def isComplete: Boolean = expected >= 0 && streams.size == expected && failure.isEmpty

  def expect(n: Int, fixed: Int): Unit = {
    fixedSize = math.max(1, fixed)
    expected = n
    expectedSet.countDown()
    if (n == 0) done.countDown()
    checkDone()
  }

  def await(nanos: Long): Boolean = done.await(nanos, TimeUnit.NANOSECONDS)

  /** The streams in stream-id order; only once complete. */
  def data: Seq[StreamData] = {
    if (!isComplete) throw new IOException(s"Jumpgate destination $key[$index] is not complete: " +
      failure.getOrElse(s"${streams.size} of $expected streams ended"))
    (0 until expected).map(streams.get)
  }

  private def fail(msg: String): Unit = {
    if (error.compareAndSet(null, msg)) {
      logWarning(s"Jumpgate destination $key[$index] failed: $msg")
      done.countDown()
    }
  }

  private def checkDone(): Unit = if (expected >= 0 && streams.size == expected) done.countDown()

  def startAccepting(): Unit = {
    val t = service.thread(s"accept-$index") {
      try {
        server.setSoTimeout(PollMs)
        // Listen until every expected stream id has been claimed by a valid header. A connection
        // does not count until then: a port is a number the kernel hands out again, so a sender
        // left over from another job (or anything else on the host) may connect here; it is
        // closed and ignored, and must not make the listener stop before the real senders are in.
        while (!closed && (expected < 0 || claimed.size < expected)) {
          try {
            val s = server.accept()
            sockets.add(s)
            if (closed) s.close()
            else {
              val r = service.thread(s"recv-$index") { read(s) }
              threads.add(r)
            }
          } catch { case _: SocketTimeoutException => }
        }
      } catch {
        case NonFatal(e) => if (!closed) fail(s"accept failed: $e")
      } finally {
        try server.close() catch { case NonFatal(_) => }
        threads.remove(Thread.currentThread())
      }
    }
    threads.add(t)
  }

  def close(): Unit = {
    closed = true
    try server.close() catch { case NonFatal(_) => }
    sockets.asScala.foreach(s => try s.close() catch { case NonFatal(_) => })
    done.countDown()
    val freed = myBytes.getAndSet(0)
    service.buffered.addAndGet(-freed)
    streams.clear()
  }

  private def grow(n: Long): Unit = {
    myBytes.addAndGet(n)
    if (service.buffered.addAndGet(n) > maxBytes)
      throw new IOException(s"received data exceeds spark.jumpgate.receiver.maxBufferBytes=$maxBytes")
  }

  private def readFully(in: InputStream, b: Array[Byte], off: Int, len: Int): Unit = {
    var got = 0
    while (got < len) {
      val n = in.read(b, off + got, len - got)
      if (n < 0) throw new EOFException("stream ended inside its header")
      got += n
    }
  }

  /** Read one stream: header, then frames into chunks, then the end marker (contract section 3). A
   *  connection whose header is not a valid, unclaimed stream id of this destination is dropped. */
  private def read(sock: Socket): Unit = {
    try {
      sock.setReceiveBufferSize(4 << 20)
      val in = sock.getInputStream
      val head = new Array[Byte](8)
      sock.setSoTimeout(HeaderTimeoutMs)
      val id = try {
        readFully(in, head, 0, 8)
        expectedSet.await(60, TimeUnit.SECONDS)
        val id = Le.i32(head, 4)
        if (!java.util.Arrays.equals(head, 0, 4, HeaderMagic, 0, 4)) None
        else if (id < 0 || expected < 0 || id >= expected || !claimed.add(id)) None
        else Some(id)
      } catch { case _: IOException => None }
      if (id.isEmpty) { // not one of this destination's streams: drop it, keep listening
        logDebug(s"Jumpgate destination $key[$index]: ignored a connection from ${sock.getRemoteSocketAddress} " +
          s"(header ${head.map(b => f"$b%02x").mkString})")
        return
      }
      sock.setSoTimeout(0)
      readStream(in, id.get)
    } catch {
      case NonFatal(e) => if (!closed) fail(s"stream from ${sock.getRemoteSocketAddress}: ${e.getMessage}")
    } finally {
      sockets.remove(sock)
      try sock.close() catch { case NonFatal(_) => }
      threads.remove(Thread.currentThread())
    }
  }

  /** The frames and end marker of stream `id`, after its header. */
  private def readStream(in: InputStream, id: Int): Unit = {
    val chunks = ArrayBuffer[Chunk]()
    var buf = new Array[Byte](FirstChunkSize)
    grow(buf.length)
    var pos = 0 // bytes in buf
    var scan = 0 // start of the first frame not yet complete
    var chunkTuples = 0
    var tuples = 0L
    var total = 8L
    var ended = false
    while (!ended) {
      if (pos == buf.length) { // full: keep complete frames, move the partial one to a new chunk
        val need = if (pos - scan >= 4) 4 + Le.u32(buf, scan) else 4L
        val size = math.max(math.min(ChunkSize.toLong, 2L * buf.length), need + 16).toInt
        val next = new Array[Byte](size)
        System.arraycopy(buf, scan, next, 0, pos - scan)
        chunks += new Chunk(buf, scan, chunkTuples)
        grow(size)
        pos -= scan
        scan = 0
        chunkTuples = 0
        buf = next
      }
      val n = in.read(buf, pos, buf.length - pos)
      if (n < 0) throw new EOFException(s"stream $id ended before its end marker after $tuples tuples")
      pos += n
      total += n
      var more = true
      while (more && pos - scan >= 4) {
        val len = Le.u32(buf, scan)
        if (len == 0) {
          if (pos - scan >= 12) {
            val count = Le.i64(buf, scan + 4)
            if (count != tuples) throw new IOException(s"stream $id: end marker counts $count tuples, $tuples arrived")
            if (pos - scan > 12 || in.read() >= 0) throw new IOException(s"stream $id: data after the end marker")
            ended = true
          }
          more = false
        } else {
          if (len < fixedSize || len >= (1L << 31)) throw new IOException(s"stream $id: tuple $tuples has length $len")
          if (pos - scan >= 4 + len) {
            scan += 4 + len.toInt
            tuples += 1
            chunkTuples += 1
          } else more = false
        }
      }
    }
    chunks += new Chunk(buf, scan, chunkTuples)
    if (closed) return
    streams.put(id, new StreamData(id, chunks.toIndexedSeq, tuples, total))
    checkDone()
  }
}
