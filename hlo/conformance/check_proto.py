#!/usr/bin/env python3
"""Conformance of hlo-opt's HloModuleProto writer with XLA (jaxlib).

For each original module FILE, OURS_DIR/<name>.pb holds the HloModuleProto
hlo-opt wrote for it (or <name>.err the reason it could not). XLA loads our
proto (`HloModule.from_serialized_hlo_module_proto`) and its `to_string()`
must equal XLA's `to_string()` of the original text.

Where they differ only as XLA's *own* text -> proto -> module round trip
differs (module-config attributes such as `replica_count` have no
HloModuleProto field), or XLA rejects our proto with the very error it
rejects its own proto of the original with (a send-done whose operand is
not the send: XLA's text parser takes it, its proto reader does not), the
module is counted as `same as XLA's round trip`.

With --dump-xla-dir DIR, XLA's own proto of each module is written to
DIR/<name>.pb (for the reader conformance: hlo-opt reads XLA's protos).

XLA aborts the process on a few inputs, so all XLA calls run in a worker
subprocess that is restarted after a crash (the module is reported).

XLA cannot read its own proto of a few modules (its proto reader reads past
the end of a list, or aborts on it). Every module that does not match the
text, matches only XLA's own round trip, or aborts the worker is checked
for that at run time: XLA's own proto of it (text -> proto) is read back
(proto -> module -> text) several times in the worker, whose heap is that
of all the modules before it, then several times in each of two fresh
processes (`--self-check`), the same bytes each time. If XLA aborts, or its
readings of the same bytes differ (the two processes fill the memory
malloc hands out with different bytes, `MALLOC_PERTURB_`, so that a reading
of memory XLA never wrote differs between them), the module is
reported as `XLA cannot read its own proto` with the evidence (the abort
message, the differing lines) and counted apart: there is no reading of
XLA's to compare ours with. A module whose proto XLA reads the same way
every time must match as above.

With --read-dir DIR instead (the reader direction), DIR/<name> is hlo-opt's
printed text of its reading of XLA's proto of FILE; XLA must read it as the
module XLA reads from its own proto.

An original FILE ending in `.pb` is a serialized HloModuleProto (one XLA
wrote): XLA's module of it is XLA's reading of that proto, in both
directions.

Usage: check_proto.py (--ours-dir DIR [--dump-xla-dir DIR] | --read-dir DIR) FILE...
Exit 1 if any module fails. Summary line: `proto conformance (writer|reader):
N of M modules match (K same as XLA's own round trip, X XLA cannot read its
own proto, D known differences, S skipped)`.
"""
import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile

# XLA's readings of its own proto per self-check process and in the worker
# (its out-of-bounds reads give the same garbage several times in a row now
# and then: in a fresh process, whose heap is still zeros, all 16 readings of
# two processes came out the same in one sweep; hence the two processes'
# different MALLOC_PERTURB_ fill, see self_check), and per process for
# protos over SELF_CHECK_BIG bytes (hundreds of MB each).
SELF_CHECK_READS = 8
SELF_CHECK_WORKER_READS = 8
SELF_CHECK_BIG_READS = 2
SELF_CHECK_BIG = 64 << 20

# XLA's protos over this many bytes are not kept in the worker once dumped
# (read back from the dump when needed): with our proto and XLA's reading
# of it, three copies of an 805 MB proto would be held at once.
KEEP_XLA_PB = 64 << 20


class Done(Exception):
    """The job's result is decided."""


def load_original(hlo, path):
    """XLA's module of an original: its reading of the text, or of the
    serialized HloModuleProto for a `.pb` file (a proto XLA wrote, e.g. the
    generated corpus testdata/jax_gen)."""
    if path.endswith(".pb"):
        with open(path, "rb") as f:
            return hlo.HloModule.from_serialized_hlo_module_proto(f.read())
    with open(path, encoding="utf-8") as f:
        return hlo.hlo_module_from_text(f.read())


def top_level_field(pb: bytes, number: int) -> list:
    """The payloads of length-delimited field `number` of a serialized
    message (its top level only)."""
    def varint(i):
        value = shift = 0
        while True:
            byte = pb[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value, i
    out, i = [], 0
    while i < len(pb):
        key, i = varint(i)
        wire = key & 7
        if wire == 0:
            _, i = varint(i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            n, i = varint(i)
            if key >> 3 == number:
                out.append(pb[i:i + n])
            i += n
        else:
            raise ValueError(f"wire type {wire} at the top level")
    return out


def module_config(m, pb):
    """What XLA keeps of a module's config that its text does not show: the
    SPMD shardings of the entry's result and parameters (as XLA reads them)
    and the device assignment (HloModuleProto field 15, as XLA writes it
    again into `pb`, its proto of the module)."""
    return (str(m.spmd_output_sharding), str(m.spmd_parameters_shardings),
            top_level_field(pb, 15))


def reader_job(hlo, job, res) -> None:
    """Reader direction: XLA reads hlo-opt's printed text of its reading of
    XLA's proto (job["read"]) as the module XLA reads from that proto."""
    try:
        m = load_original(hlo, job["path"])
        expected_text = m.to_string()
    except Exception as e:
        res["skip"] = "XLA rejects the original: " + str(e).splitlines()[0][:120]
        return
    if load_original(hlo, job["path"]).to_string() != expected_text:
        res["skip"] = "XLA's own text of the original differs between two reads"
        return
    if not os.path.exists(job["read"]):
        res["fail"] = "hlo-opt could not read XLA's proto"
        return
    with open(job["read"], encoding="utf-8") as f:
        ours = f.read()
    try:
        actual = hlo.hlo_module_from_text(ours).to_string()
    except Exception as e:
        res["fail"] = "XLA rejects our printed text: " + str(e).splitlines()[0][:300]
        return
    if actual == expected_text:
        res["ok"] = True
        return
    # XLA's text parser numbers the stack frame tables in the order the
    # text's instructions use them, XLA's proto reader in another order, so
    # XLA's own text of its reading of a proto reads back differently when
    # the two orders differ (most optimized modules with stack frames); our
    # text must then read as XLA's own text does.
    try:
        own_text = hlo.hlo_module_from_text(expected_text).to_string()
    except Exception:  # XLA cannot read its own text of it back
        own_text = None
    if actual == own_text:
        res["ok_roundtrip"] = True
        return
    own = m.as_serialized_hlo_module_proto()
    job["own_pb_bytes"] = own
    roundtrip = hlo.HloModule.from_serialized_hlo_module_proto(own).to_string()
    if actual == roundtrip:
        res["ok_roundtrip"] = True
        return
    # An original in text: the proto hlo-opt read is XLA's proto of XLA's
    # module of that text. XLA's text of its reading of that proto lists the
    # computations in its call-graph post-order over the proto's ids (as
    # hlo-opt prints a module read from a proto), which may differ from the
    # original text's order, so XLA's text parser numbers the stack frame
    # tables of both differently; our text must then read as XLA's own text
    # of its reading of that proto does.
    try:
        own_roundtrip_text = hlo.hlo_module_from_text(roundtrip).to_string()
    except Exception:  # XLA cannot read its own text of it back
        own_roundtrip_text = None
    if actual == own_roundtrip_text:
        res["ok_roundtrip"] = True
        return
    diff = list(difflib.unified_diff(roundtrip.splitlines(), actual.splitlines(), "xla", "ours", n=0, lineterm=""))
    res["fail"] = "XLA reads our text of its proto as a different module"
    res["diff"] = [l[:300] for l in diff[2:8]]


def worker() -> None:
    from jax._src.lib import hlo  # pinned jaxlib (see requirements.txt)

    for line in sys.stdin:
        job = json.loads(line)
        path, ours, dump = job["path"], job["ours"], job["dump"]
        res = {"path": path}
        try:
            if job.get("read"):
                reader_job(hlo, job, res)
                raise Done
            try:
                m = load_original(hlo, path)
                expected = m.to_string()
                again = load_original(hlo, path).to_string()
            except Exception as e:
                res["skip"] = "XLA rejects the original: " + str(e).splitlines()[0][:120]
                raise Done
            if again != expected:
                res["skip"] = "XLA's own text of the original differs between two reads"
                raise Done
            xla_pb = m.as_serialized_hlo_module_proto()
            del m

            def m_original():
                return load_original(hlo, path)
            job["own_pb_bytes"] = xla_pb
            if dump:
                with open(dump, "wb") as f:
                    f.write(xla_pb)
                if len(xla_pb) > KEEP_XLA_PB:
                    xla_pb = None
                    job["own_pb_bytes"] = None

            def xla_proto():
                if xla_pb is not None:
                    return xla_pb
                with open(dump, "rb") as f:
                    return f.read()

            if ours is None:
                res["fail"] = "hlo-opt wrote no proto"
                raise Done
            with open(ours, "rb") as f:
                ours_pb = f.read()
            try:
                ours_m = hlo.HloModule.from_serialized_hlo_module_proto(ours_pb)
                actual = ours_m.to_string()
            except Exception as e:
                why = str(e).splitlines()[0][:300]
                try:
                    hlo.HloModule.from_serialized_hlo_module_proto(xla_proto())
                except Exception as own:
                    if str(own).splitlines()[0][:300] == why:
                        # XLA rejects its own proto of the original the same
                        # way: our proto is read as XLA's own is.
                        res["ok_roundtrip"] = True
                        res["note"] = "XLA rejects its own proto of it too: " + why
                        raise Done
                res["fail"] = "XLA rejects our proto: " + why
                raise Done
            # The config XLA keeps from our proto is the one it keeps from
            # the original (a text has none; a proto XLA wrote may have a
            # device assignment and SPMD shardings).
            if path.endswith(".pb"):
                expected_config = module_config(m_original(), xla_proto())
            else:
                expected_config = ("None", "None", [])
            if path.endswith(".pb") or top_level_field(ours_pb, 15):
                ours_config = module_config(ours_m, ours_m.as_serialized_hlo_module_proto())
            else:  # XLA writes no device assignment it did not read
                ours_config = module_config(ours_m, b"")
            del ours_m
            if ours_config != expected_config:
                res["fail"] = "XLA keeps another device assignment or SPMD sharding from our proto"
                res["diff"] = [f"xla:  {expected_config}"[:300], f"ours: {ours_config}"[:300]]
                raise Done
            if actual == expected:
                res["ok"] = True
                raise Done
            roundtrip = hlo.HloModule.from_serialized_hlo_module_proto(xla_proto()).to_string()
            if actual == roundtrip:
                res["ok_roundtrip"] = True
                raise Done
            diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "xla", "ours", n=0, lineterm=""))
            res["fail"] = "XLA reads our proto as a different module"
            res["diff"] = [l[:300] for l in diff[2:8]]
        except Done:
            pass
        except Exception as e:  # an error of this script, not of XLA
            res["fail"] = "checker error: " + repr(e)[:300]
        own = job.get("own_pb_bytes")
        if ("fail" in res or res.get("ok_roundtrip")) and own is not None and len(own) <= SELF_CHECK_BIG:
            # For the self-check: the bytes, and XLA's readings of them here.
            with open(job["own_pb"], "wb") as f:
                f.write(own)
            res["xla_readings"] = xla_readings(hlo, own, SELF_CHECK_WORKER_READS)
        print(json.dumps(res), flush=True)


def xla_readings(hlo, pb, reads):
    """XLA's module text of the proto `pb`, read `reads` times (a clean
    error is a reading too, as text)."""
    texts = []
    for _ in range(reads):
        try:
            texts.append(hlo.HloModule.from_serialized_hlo_module_proto(pb).to_string())
        except Exception as e:
            texts.append("error: " + str(e).splitlines()[0][:300])
    return texts


def self_check_worker() -> None:
    """XLA's own round trip of each module (text -> proto -> module ->
    text), its proto read several times: one line of JSON per module with
    the texts read."""
    from jax._src.lib import hlo

    for line in sys.stdin:
        job = json.loads(line)
        if job["pb"]:
            # The very bytes the worker read.
            with open(job["pb"], "rb") as f:
                pb = f.read()
        else:
            pb = load_original(hlo, job["path"]).as_serialized_hlo_module_proto()
        reads = SELF_CHECK_READS if len(pb) <= SELF_CHECK_BIG else SELF_CHECK_BIG_READS
        print(json.dumps({"texts": xla_readings(hlo, pb, reads)}), flush=True)


def fatal_line(stderr_text: str) -> str:
    """The message XLA aborted with: its last fatal log line
    (`F0000 ... ] Check failed: ...`), else the last line written."""
    lines = [l.strip() for l in stderr_text.splitlines() if l.strip()]
    fatal = [l for l in lines if l.startswith("F0") or "Check failed" in l]
    last = (fatal or lines or ["(nothing on stderr)"])[-1]
    return last[:300]


def self_check_pass(jobs, perturb):
    """One pass of XLA's readings of its own proto of each job's module
    (`pb`, the bytes the worker read, or made from the text at `path` where
    the worker died first) in a fresh worker process (another after an
    abort, for the rest), glibc filling the memory it hands out with the
    byte `perturb ^ 0xff` (`MALLOC_PERTURB_`): path -> ("texts", list) or
    ("abort", message)."""
    out = {}
    paths = [j["path"] for j in jobs]
    i = 0
    while i < len(paths):
        with tempfile.TemporaryFile("w+") as jobfile, tempfile.TemporaryFile("w+") as errfile:
            for j in jobs[i:]:
                jobfile.write(json.dumps({"path": j["path"], "pb": j["pb"]}) + "\n")
            jobfile.seek(0)
            proc = subprocess.Popen([sys.executable, __file__, "--self-check"], stdin=jobfile,
                                    stdout=subprocess.PIPE, stderr=errfile, text=True,
                                    env=dict(os.environ, MALLOC_PERTURB_=str(perturb)))
            for line in proc.stdout:
                res = json.loads(line)
                out[paths[i]] = ("texts", res["texts"])
                i += 1
            proc.wait()
            if i < len(paths):
                # The worker died on paths[i]: XLA aborted on its own proto.
                errfile.seek(0)
                out[paths[i]] = ("abort", fatal_line(errfile.read()))
                i += 1
    return out


def self_check(jobs):
    """Whether XLA can read its own proto of each job's module, from its
    readings in the worker (`readings`) and two passes in separate
    processes whose fresh memory holds different bytes (0x5a, then 0xa5),
    so that a reading of memory XLA never wrote differs between them:
    path -> evidence that it cannot (an abort, readings of the same bytes
    that differ), or None (it reads it the same way every time)."""
    passes = [self_check_pass(jobs, 0xA5), self_check_pass(jobs, 0x5A)]
    verdict = {}
    for j in jobs:
        p = j["path"]
        results = [r[p] for r in passes]
        aborts = [msg for kind, msg in results if kind == "abort"]
        if aborts:
            verdict[p] = [f"XLA aborts reading its own proto: {aborts[0]}"]
            continue
        texts = j["readings"] + [t for _, ts in results for t in ts]
        distinct = list(dict.fromkeys(texts))
        if len(distinct) == 1:
            verdict[p] = None
            continue
        diff = list(difflib.unified_diff(distinct[0].splitlines(), distinct[1].splitlines(),
                                         "reading 1", "reading 2", n=0, lineterm=""))
        verdict[p] = [f"{len(distinct)} different readings of the same bytes in {len(texts)} reads "
                      f"(the worker, two fresh processes), e.g.:"] + [l[:300] for l in diff[2:8]]
    return verdict


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker()
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--self-check":
        self_check_worker()
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ours-dir", help="hlo-opt's protos (<name>.pb) of the modules: writer direction")
    ap.add_argument("--read-dir", help="hlo-opt's printed text (<name>) of its reading of XLA's protos: reader direction")
    ap.add_argument("--dump-xla-dir")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--known", action="append", default=[], metavar="NAME",
                    help="module expected to fail (documented in the caller); reported, not failed")
    ap.add_argument("--known-file", metavar="TSV",
                    help="lines `writer|reader<TAB>NAME<TAB>reason` of modules expected to fail")
    ap.add_argument("--skip", action="append", default=[], metavar="NAME",
                    help="module not checked (the caller says why); reported as skipped")
    ap.add_argument("--chunk", type=int, default=200,
                    help="jobs per worker process: a fresh XLA process per chunk keeps memory bounded")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    if args.known_file:
        direction = "reader" if args.read_dir else "writer"
        with open(args.known_file, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2 and not line.startswith("#") and parts[0] == direction:
                    args.known.append(parts[1])
    if args.dump_xla_dir:
        os.makedirs(args.dump_xla_dir, exist_ok=True)
    jobs = []
    skipped = 0
    # XLA's own protos of the modules the self-check looks at.
    scratch = tempfile.TemporaryDirectory(prefix="check-proto-")
    for path in args.files:
        name = os.path.basename(path)
        if name in args.skip:
            skipped += 1
            print(f"skipped: {name}: not checked (see above)")
            continue
        if args.read_dir:
            jobs.append({"path": path, "ours": None, "dump": None, "our_error": None,
                         "read": os.path.join(args.read_dir, name),
                         "own_pb": os.path.join(scratch.name, f"{len(jobs)}.pb")})
            continue
        ours = os.path.join(args.ours_dir, name + ".pb")
        err = os.path.join(args.ours_dir, name + ".err")
        dump = os.path.join(args.dump_xla_dir, name + ".pb") if args.dump_xla_dir else None
        jobs.append({"path": path, "ours": ours if os.path.exists(ours) else None, "dump": dump,
                     "our_error": open(err, encoding="utf-8").read().strip() if os.path.exists(err) else None,
                     "own_pb": os.path.join(scratch.name, f"{len(jobs)}.pb")})
    ok = roundtrip = failed = known = xla_cannot = 0
    matched_known = []
    # Modules whose verdict waits for XLA's self-check: (job, result), the
    # result `{"ok_roundtrip": ...}`, `{"fail": ...}` or `{"aborted": True}`.
    pending = []
    i = 0
    while i < len(jobs):
        chunk = jobs[i:i + max(1, args.chunk)]
        # The jobs go through a file: a pipe in both directions could fill up
        # both ways and deadlock.
        with tempfile.TemporaryFile("w+") as jobfile:
            for j in chunk:
                jobfile.write(json.dumps({k: j.get(k) for k in ("path", "ours", "dump", "read", "own_pb")}) + "\n")
            jobfile.seek(0)
            proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=jobfile,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        done = 0
        for line in proc.stdout:
            res = json.loads(line)
            job = jobs[i]
            name = os.path.basename(job["path"])
            i += 1
            done += 1
            if "skip" in res:
                skipped += 1
                print(f"skipped: {name}: {res['skip']}")
            elif res.get("ok"):
                ok += 1
                if name in args.known:
                    matched_known.append(name)
            else:
                pending.append((job, res))
        proc.wait()
        if i < len(jobs) and done < len(chunk):
            # The worker died on jobs[i]: XLA aborted the process.
            pending.append((jobs[i], {"aborted": True}))
            i += 1
    checks = [{"path": job["path"], "readings": res.get("xla_readings", []),
               "pb": job["own_pb"] if os.path.exists(job["own_pb"]) else None}
              for job, res in pending]
    verdicts = self_check(checks) if pending else {}
    scratch.cleanup()
    for job, res in pending:
        name = os.path.basename(job["path"])
        evidence = verdicts[job["path"]]
        if evidence is not None:
            xla_cannot += 1
            print(f"XLA cannot read its own proto of this module: {name}:")
            for l in evidence:
                print("    " + l)
            continue
        if res.get("ok_roundtrip"):
            roundtrip += 1
            if "note" in res:
                print(f"same as XLA's own round trip: {name}: {res['note']}")
            if name in args.known:
                matched_known.append(name)
            continue
        why = res.get("fail") or "XLA aborted the process loading our proto (or the original)"
        if job["our_error"]:
            why += f" ({job['our_error'][:300]})"
        if name in args.known:
            known += 1
            print(f"known difference: {name}: {why}")
            continue
        failed += 1
        print(f"FAIL {name}: {why}")
        if not args.quiet:
            for l in res.get("diff", []):
                print("    " + l)
    for name in matched_known:
        print(f"listed as a known difference, but matches now (remove its line): {name}")
    total = ok + roundtrip + failed + known + xla_cannot
    what = "reader" if args.read_dir else "writer"
    print(f"proto conformance ({what}): {ok + roundtrip} of {total} modules match "
          f"({roundtrip} same as XLA's own round trip, {xla_cannot} XLA cannot read its own proto, "
          f"{known} known differences, {skipped} skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
