"""A lossy UDP relay: listens on a UDP port, forwards every datagram to a target address, and sends
the target's answers back, dropping, duplicating and reordering datagrams in both directions with a
seeded random generator. It stands in for a lossy network where the kernel has none to offer (no
netem qdisc, no iptables): tests and bench/udp_send.py put it on the path of UDP streams
(docs/udp-transport.md, "Testing under loss").

    python -m jumpgate.deploy.udp_relay --target 127.0.0.1:9000 --loss 0.01 --dup 0.01 \\
        --reorder 0.01 --depth 3 --seed 7

It prints `{"event":"ready","port":N}` once it listens, and when its standard input closes (or on
SIGTERM/SIGINT) `{"event":"report",...}`: per direction ("forward": senders to the target, "back":
the target's answers) the datagrams received, forwarded (copies included), dropped, duplicated and
reordered. `RelayProcess` runs it from Python.

Each sender address gets its own socket towards the target, so that the target's answers (a
receiver's acknowledgements go to where the datagrams came from) find their way back to it. Per
datagram, in this order: dropped with probability `loss`; else held back with probability
`reorder` and released after `depth` later datagrams of the same direction of the same sender (or
after 20 ms, so that the last datagrams of a stream are not held for ever); else forwarded, and
with probability `dup` forwarded twice. Each direction of each sender draws from its own generator,
seeded from `seed`, the sender's number (in order of first datagram) and the direction, so a run
with the same arrivals makes the same choices.

The relay reads coalesced runs (UDP_GRO) and sends runs of equal-size datagrams as one UDP GSO send
where it can, so that it can keep up with a sender in the hundreds of thousands of datagrams per
second; what it cannot take is lost in its socket buffer like on a real path, and counted nowhere.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

SOL_UDP, UDP_SEGMENT, UDP_GRO = 17, 103, 104  # <netinet/udp.h>
SO_SNDBUFFORCE, SO_RCVBUFFORCE = 32, 33  # <asm/socket.h>
BUF = 65536
RCVBUF = 32 << 20
HOLD_S = 0.020  # a held datagram is released at the latest this late
GSO_MAX = 64  # datagrams per GSO send
DIRECTIONS = ("forward", "back")


@dataclass(frozen=True, slots=True)
class Faults:
    """What the relay does to each datagram (probabilities in [0, 1))."""

    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0
    depth: int = 3  # a reordered datagram goes after this many later ones
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("loss", "dup", "reorder"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < 1:
                raise ValueError(f"{name} must be a probability in [0, 1), got {v!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or not 1 <= self.depth <= 1000:
            raise ValueError(f"depth must be an integer in 1..1000, got {self.depth!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")

    @classmethod
    def from_text(cls, text: str) -> Faults | None:
        """A setting's value: a JSON object of the fields, or blank for no relay. ValueError says
        what is wrong."""
        if not text.strip():
            return None
        return cls.from_json(json.loads(text))  # json.JSONDecodeError is a ValueError

    @classmethod
    def from_json(cls, obj: object) -> Faults:
        """From a JSON object with any of the fields; unknown keys are an error."""
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object with loss, dup, reorder, depth, seed; got {obj!r}")
        unknown = sorted(set(obj) - {"loss", "dup", "reorder", "depth", "seed"})
        if unknown:
            raise ValueError(f"unknown keys {', '.join(unknown)} (known: loss, dup, reorder, depth, seed)")
        return cls(**obj)

    def args(self) -> list[str]:
        return ["--loss", str(self.loss), "--dup", str(self.dup), "--reorder", str(self.reorder),
                "--depth", str(self.depth), "--seed", str(self.seed)]


@dataclass
class Counts:
    received: int = 0
    forwarded: int = 0
    dropped: int = 0
    duplicated: int = 0
    reordered: int = 0


@dataclass
class _Lane:
    """One direction of one sender: its generator, what it holds back, what waits to be sent."""

    rng: random.Random
    held: list[tuple[int, float, bytes]] = field(default_factory=list)  # (release after, deadline, datagram)
    seen: int = 0
    out: list[bytes] = field(default_factory=list)


class Relay:
    """The relay's loop (in the process that runs it)."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], faults: Faults) -> None:
        self.faults = faults
        self.target = target
        self.counts = {d: Counts() for d in DIRECTIONS}
        family = socket.AF_INET6 if ":" in listen[0] else socket.AF_INET
        self.sock = self._socket(family)
        self.sock.bind(listen)
        self.listen_host = listen[0]
        self.port: int = self.sock.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ, None)
        self.up: dict[tuple, socket.socket] = {}  # sender address -> its socket towards the target
        self.numbers: dict[tuple, int] = {}  # sender address -> its number, in order of first datagram
        self.lanes: dict[tuple[tuple, str], _Lane] = {}
        self.stopped = threading.Event()

    @staticmethod
    def _socket(family: int) -> socket.socket:
        s = socket.socket(family, socket.SOCK_DGRAM)
        for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:  # root may exceed rmem_max/wmem_max; others get what the kernel allows
                s.setsockopt(socket.SOL_SOCKET, force, RCVBUF)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, plain, RCVBUF)
        try:
            s.setsockopt(SOL_UDP, UDP_GRO, 1)
        except OSError:
            pass  # datagrams then come one by one
        s.setblocking(False)
        return s

    def _lane(self, sender: tuple, direction: str) -> _Lane:
        lane = self.lanes.get((sender, direction))
        if lane is None:
            number = self.numbers.setdefault(sender, len(self.numbers))
            seed = self.faults.seed * 1_000_003 + number * 2 + DIRECTIONS.index(direction)
            lane = self.lanes[(sender, direction)] = _Lane(random.Random(seed))
        return lane

    def _upstream(self, sender: tuple) -> socket.socket:
        s = self.up.get(sender)
        if s is None:
            s = self._socket(socket.AF_INET6 if ":" in self.target[0] else socket.AF_INET)
            if self.listen_host not in ("", "0.0.0.0", "::"):
                # from the address it listens on: the target's answers go to where datagrams come
                # from, and a route to the target over a link without an address of its own (a
                # switch port) would otherwise give them a source the target cannot answer
                s.bind((self.listen_host, 0))
            s.connect(self.target)
            self.up[sender] = s
            self.sel.register(s, selectors.EVENT_READ, sender)
        return s

    def _take(self, lane: _Lane, c: Counts, datagram: bytes, now: float) -> None:
        f = self.faults
        c.received += 1
        lane.seen += 1
        rng = lane.rng
        if rng.random() < f.loss:
            c.dropped += 1
        elif rng.random() < f.reorder:
            c.reordered += 1
            lane.held.append((lane.seen + f.depth, now + HOLD_S, datagram))
        else:
            lane.out.append(datagram)
            if rng.random() < f.dup:
                c.duplicated += 1
                lane.out.append(datagram)
        if lane.held:
            keep = []
            for held in lane.held:
                if lane.seen >= held[0] or now >= held[1]:
                    lane.out.append(held[2])
                else:
                    keep.append(held)
            lane.held = keep

    def _flush(self, lane: _Lane, c: Counts, sock: socket.socket, addr: tuple | None) -> None:
        """Send what waits, runs of one size as GSO sends."""
        out, lane.out = lane.out, []
        i = 0
        while i < len(out):
            size, k = len(out[i]), 1
            while i + k < len(out) and k < GSO_MAX and len(out[i + k]) == size and (k + 1) * size <= 65000:
                k += 1
            try:
                if k == 1:
                    sock.sendto(out[i], addr) if addr else sock.send(out[i])
                else:
                    cmsg = [(SOL_UDP, UDP_SEGMENT, struct.pack("=H", size))]
                    sock.sendmsg([b"".join(out[i:i + k])], cmsg, 0, addr) if addr else \
                        sock.sendmsg([b"".join(out[i:i + k])], cmsg)
                c.forwarded += k
            except BlockingIOError:
                pass  # the relay's own buffer is full: lost, as on a congested path
            except OSError:
                pass  # nobody listens there (yet, or any more): lost
            i += k

    def _read(self, sock: socket.socket, origin: tuple | None) -> None:
        """Take what one socket holds (a bounded number of reads, so the other side gets its turn):
        the listening socket (`origin` None: senders' datagrams) or a sender's socket towards the
        target (`origin` that sender: the target's answers)."""
        for _ in range(64):
            try:
                data, anc, _, addr = sock.recvmsg(BUF, socket.CMSG_SPACE(4))
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. ECONNREFUSED: the target is not listening
            seg = len(data)
            for level, kind, value in anc:
                if level == SOL_UDP and kind == UDP_GRO:
                    seg = struct.unpack("=i", value[:4])[0] or len(data)
            now = time.monotonic()
            if origin is None:  # from a sender, to the target
                sender, direction, out_sock, out_addr = addr, "forward", self._upstream(addr), None
            else:  # the target's answer, back to its sender
                sender, direction, out_sock, out_addr = origin, "back", self.sock, origin
            lane, c = self._lane(sender, direction), self.counts[direction]
            for at in range(0, len(data), seg):
                self._take(lane, c, data[at:at + seg], now)
            self._flush(lane, c, out_sock, out_addr)

    def _release_late(self) -> None:
        now = time.monotonic()
        for (sender, direction), lane in self.lanes.items():
            if not lane.held:
                continue
            keep = [h for h in lane.held if now < h[1]]
            lane.out += [h[2] for h in lane.held if now >= h[1]]
            lane.held = keep
            if lane.out:
                sock, addr = (self.up[sender], None) if direction == "forward" else (self.sock, sender)
                self._flush(lane, self.counts[direction], sock, addr)

    def run(self) -> None:
        while not self.stopped.is_set():
            for key, _ in self.sel.select(timeout=HOLD_S / 2):
                self._read(key.fileobj, key.data)  # type: ignore[arg-type]
            self._release_late()

    def report(self) -> dict:
        return {"event": "report", "faults": asdict(self.faults), "senders": len(self.up),
                **{d: asdict(c) for d, c in self.counts.items()}}

    def close(self) -> None:
        self.sel.close()
        for s in (self.sock, *self.up.values()):
            s.close()


def _address(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SystemExit(f"udp_relay: {what} must be HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m jumpgate.deploy.udp_relay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True, help="HOST:PORT to forward to")
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on (port 0: any)")
    ap.add_argument("--loss", type=float, default=0.0, help="probability of dropping a datagram")
    ap.add_argument("--dup", type=float, default=0.0, help="probability of sending a datagram twice")
    ap.add_argument("--reorder", type=float, default=0.0, help="probability of holding a datagram back")
    ap.add_argument("--depth", type=int, default=3, help="a held datagram goes after this many later ones")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random generators")
    a = ap.parse_args(argv)
    try:
        faults = Faults(a.loss, a.dup, a.reorder, a.depth, a.seed)
    except ValueError as e:
        raise SystemExit(f"udp_relay: {e}") from None
    relay = Relay(_address(a.listen, "--listen"), _address(a.target, "--target"), faults)

    def stop(*_: object) -> None:
        relay.stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    threading.Thread(target=lambda: (sys.stdin.read(), stop()), daemon=True).start()
    print(json.dumps({"event": "ready", "port": relay.port}), flush=True)
    try:
        relay.run()
    finally:
        relay.close()
        try:
            print(json.dumps(relay.report()), flush=True)
        except BrokenPipeError:
            pass  # nobody reads the report any more
    return 0


class RelayProcess:
    """`python -m jumpgate.deploy.udp_relay` as a child process: `port` once it listens; `stop()`
    ends it and returns its report."""

    def __init__(self, target: tuple[str, int], faults: Faults, listen_host: str = "127.0.0.1",
                 ready_timeout: float = 30.0) -> None:
        self.target = target
        self.faults = faults
        argv = [sys.executable, "-m", "jumpgate.deploy.udp_relay", "--target", f"{target[0]}:{target[1]}",
                "--listen", f"{listen_host}:0", *faults.args()]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._report: dict | None = None
        line = self._line(ready_timeout)
        try:
            ready = json.loads(line)
            self.port: int = int(ready["port"])
        except (ValueError, KeyError, TypeError):
            self.kill()
            raise RuntimeError(f"the UDP relay did not start: {line!r}") from None

    def _line(self, timeout: float) -> str:
        out: list[str] = []
        t = threading.Thread(target=lambda: out.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        t.start()
        t.join(timeout)
        if not out:
            self.kill()
            raise RuntimeError(f"the UDP relay did not answer within {timeout:.0f} s")
        return out[0]

    def stop(self, timeout: float = 10.0) -> dict:
        """End the relay; its report (per direction: received, forwarded, dropped, duplicated,
        reordered)."""
        if self._report is not None:
            return self._report
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            line = self._line(timeout)
            self._report = json.loads(line) if line else {}
        except (RuntimeError, ValueError):
            self._report = {}
        self.kill()
        return self._report

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def __enter__(self) -> RelayProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
