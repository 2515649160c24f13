package io.jumpgate.spark.planner

import java.util.IdentityHashMap
import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable
import scala.jdk.OptionConverters._
import scala.util.control.NonFatal

import io.jumpgate.core.client.{Capabilities, JumpgateClient, RequestRejected, ServerUnreachable}
import io.jumpgate.spark.{JumpgateConf, JumpgateStats}
import io.jumpgate.spark.exec.JumpgateExec

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.QueryStageExec

/** Tags the planner leaves on physical nodes; EXPLAIN's Jumpgate section reads them. */
object JumpgateTags {
  /** Why a node stays in Spark. */
  val Reason: TreeNodeTag[String] = TreeNodeTag[String]("jumpgate.reason")
  /** The planner has looked at this node (so later passes over the same nodes leave them alone). */
  val Visited: TreeNodeTag[Boolean] = TreeNodeTag[Boolean]("jumpgate.visited")
  /** A JumpgateExec planned inside adaptive execution (its job may start when its stage is created). */
  val Adaptive: TreeNodeTag[Boolean] = TreeNodeTag[Boolean]("jumpgate.adaptive")
}

/** An offload candidate: a maximal subtree of supported operators, and how it was judged. */
final case class Candidate(frag: Frag, region: Int, piecesInRegion: Int)

/**
 * Offload planning after Spark's physical planning (thesis section 3.5.2, "bottom-up from the table
 * scan"): every node asks its converter; a node is offloadable when its converter accepts it and
 * all its inputs are offloadable. The maximal offloadable subtrees are the candidates; each is
 * judged by the threshold heuristic and by its score (data reduction per Spark<->Jumpgate
 * boundary), then validated by the server (a dry compile), and finally replaced by one
 * [[JumpgateExec]] that runs it as one Jumpgate job. A rejection by the server names the operation
 * it cannot run: that operator is cut off (it and everything above it stay in Spark) and the
 * planning repeats, so the rest of the subtree is still offloaded.
 */
final class OffloadPlanner(session: SparkSession, conf: JumpgateConf) extends Logging {
  import OffloadPlanner._

  private val client = JumpgateClient.shared(conf.url, conf.httpTimeoutMs, conf.token.orNull)
  private val cut = new IdentityHashMap[SparkPlan, Why]()
  private val rejected = new IdentityHashMap[SparkPlan, Why]()
  private lazy val cores = math.max(1, session.sparkContext.defaultParallelism)
  private lazy val destinations = if (conf.maxStreams > 0) conf.maxStreams else cores

  /** Plans `plan`, timing the run (JumpgateStats; the DEBUG log has each run's time). */
  def apply(plan: SparkPlan): SparkPlan = {
    val wall0 = System.nanoTime()
    val cpu0 = threadCpuNanos()
    // Adaptive execution calls the planner again on every re-plan (about ten times in a query with a
    // few joins). When no file scan of the plan reaches the threshold, the judge would reject every
    // candidate, so the capability lookup, file listings, row estimates and expression translation
    // are skipped: only the reasons are tagged.
    var moot: Option[Why] = None
    try {
      moot = belowThreshold(plan)
      moot match {
        case Some(why) => tagMoot(plan, why); plan
        case None => planFully(plan)
      }
    } finally {
      val wall = System.nanoTime() - wall0
      val cpu = threadCpuNanos() - cpu0
      JumpgateStats.planning(wall, cpu, skipped = moot.isDefined)
      logDebug(f"Jumpgate: planned ${plan.nodeName} in ${wall / 1e6}%.2f ms (CPU ${cpu / 1e6}%.2f ms)" +
        moot.fold("")(w => s"; nothing to offload, ${w.message}"))
    }
  }

  /** The threshold's verdict on the whole plan: every candidate's largest input is one of the plan's
   *  file scans, so if none reaches T x cores, no candidate can pass [[judge]]. The sizes come from
   *  Spark's file index (in memory): no file is opened and the server is not asked. */
  private def belowThreshold(plan: SparkPlan): Option[Why] = {
    if (!conf.thresholdEnabled) return None
    val largest = plan.collect { case s: FileSourceScanExec => FileScanConverter.inputBytes(s) }.maxOption.getOrElse(0L)
    if (largest >= conf.thresholdBytesPerCore * cores) None else Some(thresholdWhy(largest))
  }

  private def thresholdWhy(largest: Long): Why =
    Why(s"below the offload threshold: largest input ${mb(largest)} < ${mb(conf.thresholdBytesPerCore)} x $cores cores " +
      s"(${JumpgateConf.THRESHOLD})")

  /** Every node keeps the threshold as its reason (EXPLAIN's "Kept in Spark"), and is marked visited. */
  private def tagMoot(plan: SparkPlan, why: Why): Unit = plan.foreach { n =>
    n.setTagValue(JumpgateTags.Visited, true)
    n.setTagValue(JumpgateTags.Reason, why.label)
  }

  private def planFully(plan: SparkPlan): SparkPlan = {
    // Without validation the planner asks the server nothing: any rejection is a fallback at run time.
    val caps = if (conf.validateAtPlanning) Capabilities.of(client) else Capabilities.ASSUME_ALL
    var accepted: Seq[Candidate] = Nil
    var results: IdentityHashMap[SparkPlan, Either[Why, Frag]] = null
    var regions: IdentityHashMap[SparkPlan, Integer] = null
    var round = 0
    var again = true
    while (again && round < MaxRounds) {
      round += 1
      val ctx = new ConvertContext(conf, caps)
      results = new IdentityHashMap[SparkPlan, Either[Why, Frag]]()
      convert(plan, ctx, results)
      val roots = candidateRoots(plan, results)
      if (regions == null) { // the connected regions of the first pass: cut pieces count against them
        regions = new IdentityHashMap[SparkPlan, Integer]()
        roots.zipWithIndex.foreach { case (f, i) => f.allFrags.foreach(x => regions.put(x.node, i)) }
      }
      val pieces = roots.groupBy(f => regionOf(regions, f)).view.mapValues(_.size).toMap
      val judged = roots.map(f => Candidate(f, regionOf(regions, f), pieces(regionOf(regions, f))))
        .filter(c => judge(c).forall { why => rejected.put(c.frag.node, why); false })
      again = false
      accepted = judged.filter { c =>
        validate(c.frag) match {
          case None => true
          case Some((node, why)) =>
            if (node eq c.frag.node) rejected.put(node, why) else { cut.put(node, why); again = true }
            false
        }
      }
    }
    tagAll(plan, results, accepted)
    if (accepted.isEmpty) plan
    else {
      val byNode = new IdentityHashMap[SparkPlan, Candidate]()
      accepted.foreach(c => byNode.put(c.frag.node, c))
      JumpgateStats.planned(accepted.size)
      replace(plan, byNode)
    }
  }

  private def regionOf(regions: IdentityHashMap[SparkPlan, Integer], f: Frag): Int =
    f.allFrags.iterator.map(x => regions.get(x.node)).find(_ != null).map(_.intValue).getOrElse(-1 - System.identityHashCode(f))

  /** Post-order: every node gets an answer, whether or not its parent is offloadable. */
  private def convert(node: SparkPlan, ctx: ConvertContext, memo: IdentityHashMap[SparkPlan, Either[Why, Frag]])
      : Either[Why, Frag] = {
    val known = memo.get(node)
    if (known != null) return known
    node.children.foreach(c => convert(c, ctx, memo))
    val answer: Either[Why, Frag] = node match {
      case _: QueryStageExec => Left(Why("query stage already planned by adaptive execution"))
      case _ => Converters.forNode(node) match {
        case None => Left(Why(s"operator ${node.nodeName} is not offloaded"))
        case Some(c) if c.key != "scan" && !conf.operatorEnabled(c.key) =>
          Left(Why(s"spark.jumpgate.${c.key}.enabled is false"))
        case Some(c) =>
          val inputs = c.offloadedInputs(node).map(i => (i, convert(i, ctx, memo)))
          inputs.collectFirst { case (i, Left(_)) => i } match {
            case Some(i) => Left(Why(s"its input ${i.nodeName} runs in Spark"))
            case None if cut.containsKey(node) => Left(cut.get(node))
            case None =>
              (if (c.operation == "read") None else ctx.missing(c.operation)) match {
                case Some(w) => Left(w)
                case None =>
                  try c.convert(node, inputs.map(_._2.toOption.get), ctx) catch {
                    case NonFatal(e) => Left(Why(s"converter failed: $e"))
                  }
              }
          }
      }
    }
    memo.put(node, answer)
    answer
  }

  /** Top-down: the highest offloadable nodes, and none inside another candidate. */
  private def candidateRoots(plan: SparkPlan, results: IdentityHashMap[SparkPlan, Either[Why, Frag]]): Seq[Frag] = {
    val out = mutable.ArrayBuffer[Frag]()
    def walk(n: SparkPlan): Unit = Option(results.get(n)) match {
      case Some(Right(f)) if !rejected.containsKey(n) => out += f
      case _ => n.children.foreach(walk)
    }
    walk(plan)
    out.toSeq
  }

  /** The threshold heuristic (thesis 3.5.2) and the boundary score; None means worth offloading. */
  private def judge(c: Candidate): Option[Why] = {
    val f = c.frag
    if (!session.sparkContext.isLocal)
      return Some(Why("receivers run in the driver's JVM only in this version (local master); see docs/spark.md, Limits"))
    if (conf.thresholdEnabled && f.largestInput < conf.thresholdBytesPerCore * cores)
      return Some(thresholdWhy(f.largestInput))
    if (conf.scoringEnabled) {
      val s = score(c)
      if (s.perBoundary < conf.minReductionPerBoundary)
        return Some(Why(f"not worth it: ${s.describe} (${JumpgateConf.MIN_REDUCTION}=${conf.minReductionPerBoundary}%.2f)"))
    }
    None
  }

  /** Input file bytes against the NTF bytes the candidate is estimated to send back ([[Estimates]]). */
  def score(c: Candidate): Score = {
    val in = math.max(1L, c.frag.inputBytes)
    val out = math.max(1L, math.min(Long.MaxValue.toDouble, Estimates.outputBytes(c.frag, destinations)).toLong)
    Score(in, out, c.piecesInRegion)
  }

  /** Ask the server to compile the candidate (a dry run, nothing executes); None when it accepts. */
  private def validate(f: Frag): Option[(SparkPlan, Why)] = {
    if (!conf.validateAtPlanning) return None
    val request = JumpgateExec.buildRequest(f, Seq(f.drivingScan.scan.get.files), Seq(("127.0.0.1", 9)), "validate")
    val json = request.toJson
    val cached = validated.get(json)
    val verdict: Option[(String, Option[String])] = if (cached != null) cached else {
      val v = try {
        client.dryRun(json)
        None
      } catch {
        case r: RequestRejected if r.status == 503 => None // no resources now: decided again at run time
        case r: RequestRejected => Some((s"rejected by Jumpgate: ${firstLine(r.serverMessage)}", r.operation.toScala))
        case u: ServerUnreachable => Some((s"Jumpgate server unreachable: ${u.getMessage}", None))
        case NonFatal(e) => Some((s"validation failed: $e", None))
      }
      if (validated.size > 10000) validated.clear()
      validated.put(json, v)
      v
    }
    verdict.map { case (why, op) =>
      val node = op.flatMap(name => f.allFrags.find(_.ops.exists(o => o.name + "_g0" == name)).map(_.node))
      (node.getOrElse(f.node), Why(why))
    }
  }

  private def tagAll(plan: SparkPlan, results: IdentityHashMap[SparkPlan, Either[Why, Frag]], accepted: Seq[Candidate]): Unit = {
    val inside = new IdentityHashMap[SparkPlan, Boolean]()
    accepted.foreach(c => c.frag.node.foreach(n => inside.put(n, true)))
    val lines = mutable.ArrayBuffer[String]()
    plan.foreach { n =>
      n.setTagValue(JumpgateTags.Visited, true)
      if (!inside.containsKey(n)) {
        val why = Option(rejected.get(n)).orElse(Option(results.get(n)).flatMap(_.left.toOption))
          .map(_.label).getOrElse("offloadable, but part of a candidate that stays in Spark")
        n.setTagValue(JumpgateTags.Reason, why)
        lines += s"  ${n.nodeName}: $why"
      }
    }
    accepted.foreach(c => logInfo(s"Jumpgate: offloading ${c.frag.describe}: ${score(c).describe}"))
    if (lines.nonEmpty) logDebug(s"Jumpgate: kept in Spark:\n${lines.mkString("\n")}")
  }

  private def replace(plan: SparkPlan, byNode: IdentityHashMap[SparkPlan, Candidate]): SparkPlan = {
    val c = byNode.get(plan)
    if (c != null) {
      val exec = JumpgateExec(c.frag.output, c.frag, plan, io.jumpgate.spark.JumpgateExtensions.snapshot(session))
      exec.setTagValue(JumpgateTags.Visited, true)
      plan.logicalLink.foreach(exec.setLogicalLink) // adaptive execution links every stage to its logical plan
      exec
    } else if (plan.children.isEmpty) plan
    else {
      val kids = plan.children.map(replace(_, byNode))
      if (kids.zip(plan.children).forall { case (a, b) => a eq b }) plan else plan.withNewChildren(kids)
    }
  }
}

/** A candidate's score: its input bytes over its estimated output bytes, per boundary. */
final case class Score(inputBytes: Long, outputBytes: Long, boundaries: Int) {
  def reduction: Double = inputBytes.toDouble / outputBytes.toDouble
  def perBoundary: Double = reduction / math.max(1, boundaries)
  def describe: String =
    f"reduces ${OffloadPlanner.mb(inputBytes)} to about ${OffloadPlanner.mb(outputBytes)} ($reduction%.2fx) over $boundaries boundar${if (boundaries == 1) "y" else "ies"}"
}

object OffloadPlanner {
  val MaxRounds = 8
  private val validated = new ConcurrentHashMap[String, Option[(String, Option[String])]]()
  def clearValidationCache(): Unit = validated.clear()
  def mb(b: Long): String = if (b >= (1L << 20)) f"${b / 1048576.0}%.1f MB" else f"${b / 1024.0}%.1f KB"
  private val threadMx = java.lang.management.ManagementFactory.getThreadMXBean
  /** The calling thread's CPU time (0 where the JVM does not measure it). */
  def threadCpuNanos(): Long = if (threadMx.isCurrentThreadCpuTimeSupported) threadMx.getCurrentThreadCpuTime else 0L
  def firstLine(s: String): String = s.linesIterator.toSeq.headOption.getOrElse("") +
    (if (s.linesIterator.size > 1) " " + s.linesIterator.drop(1).map(_.trim).mkString(" ") else "")
}
