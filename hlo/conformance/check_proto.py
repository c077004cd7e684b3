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

With --read-dir DIR instead (the reader direction), DIR/<name> is hlo-opt's
printed text of its reading of XLA's proto of FILE; XLA must read it as the
module XLA reads from its own proto.

Usage: check_proto.py (--ours-dir DIR [--dump-xla-dir DIR] | --read-dir DIR) FILE...
Exit 1 if any module fails. Summary line:
`proto conformance: N of M modules match (K same as XLA's round trip, S skipped)`.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


class Done(Exception):
    """The job's result is decided."""


def reader_job(hlo, job, res) -> None:
    """Reader direction: XLA reads hlo-opt's printed text of its reading of
    XLA's proto (job["read"]) as the module XLA reads from that proto."""
    with open(job["path"], encoding="utf-8") as f:
        original = f.read()
    try:
        m = hlo.hlo_module_from_text(original)
        expected_text = m.to_string()
    except Exception as e:
        res["skip"] = "XLA rejects the original: " + str(e).splitlines()[0][:120]
        return
    if hlo.hlo_module_from_text(original).to_string() != expected_text:
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
    roundtrip = hlo.HloModule.from_serialized_hlo_module_proto(m.as_serialized_hlo_module_proto()).to_string()
    if actual == roundtrip:
        res["ok_roundtrip"] = True
        return
    import difflib
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
            with open(path, encoding="utf-8") as f:
                original = f.read()
            try:
                m = hlo.hlo_module_from_text(original)
                expected = m.to_string()
                again = hlo.hlo_module_from_text(original).to_string()
            except Exception as e:
                res["skip"] = "XLA rejects the original: " + str(e).splitlines()[0][:120]
                raise Done
            if again != expected:
                res["skip"] = "XLA's own text of the original differs between two reads"
                raise Done
            xla_pb = m.as_serialized_hlo_module_proto()
            if dump:
                with open(dump, "wb") as f:
                    f.write(xla_pb)
            if ours is None:
                res["fail"] = "hlo-opt wrote no proto"
                raise Done
            with open(ours, "rb") as f:
                ours_pb = f.read()
            try:
                actual = hlo.HloModule.from_serialized_hlo_module_proto(ours_pb).to_string()
            except Exception as e:
                why = str(e).splitlines()[0][:300]
                try:
                    hlo.HloModule.from_serialized_hlo_module_proto(xla_pb)
                except Exception as own:
                    if str(own).splitlines()[0][:300] == why:
                        # XLA rejects its own proto of the original the same
                        # way: our proto is read as XLA's own is.
                        res["ok_roundtrip"] = True
                        res["note"] = "XLA rejects its own proto of it too: " + why
                        raise Done
                res["fail"] = "XLA rejects our proto: " + why
                raise Done
            if actual == expected:
                res["ok"] = True
                raise Done
            roundtrip = hlo.HloModule.from_serialized_hlo_module_proto(xla_pb).to_string()
            if actual == roundtrip:
                res["ok_roundtrip"] = True
                raise Done
            import difflib
            diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), "xla", "ours", n=0, lineterm=""))
            res["fail"] = "XLA reads our proto as a different module"
            res["diff"] = [l[:300] for l in diff[2:8]]
        except Done:
            pass
        except Exception as e:  # an error of this script, not of XLA
            res["fail"] = "checker error: " + repr(e)[:300]
        print(json.dumps(res), flush=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker()
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
    for path in args.files:
        name = os.path.basename(path)
        if name in args.skip:
            skipped += 1
            print(f"skipped: {name}: not checked (see above)")
            continue
        if args.read_dir:
            jobs.append({"path": path, "ours": None, "dump": None, "our_error": None,
                         "read": os.path.join(args.read_dir, name)})
            continue
        ours = os.path.join(args.ours_dir, name + ".pb")
        err = os.path.join(args.ours_dir, name + ".err")
        dump = os.path.join(args.dump_xla_dir, name + ".pb") if args.dump_xla_dir else None
        jobs.append({"path": path, "ours": ours if os.path.exists(ours) else None, "dump": dump,
                     "our_error": open(err, encoding="utf-8").read().strip() if os.path.exists(err) else None})
    ok = roundtrip = failed = known = 0
    matched_known = []
    i = 0
    while i < len(jobs):
        pending = jobs[i:i + max(1, args.chunk)]
        # The jobs go through a file: a pipe in both directions could fill up
        # both ways and deadlock.
        with tempfile.TemporaryFile("w+") as jobfile:
            for j in pending:
                jobfile.write(json.dumps({k: j.get(k) for k in ("path", "ours", "dump", "read")}) + "\n")
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
            elif res.get("ok_roundtrip"):
                roundtrip += 1
                if "note" in res:
                    print(f"same as XLA's own round trip: {name}: {res['note']}")
                if name in args.known:
                    matched_known.append(name)
            else:
                why = res["fail"]
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
        proc.wait()
        if i < len(jobs) and done < len(pending):
            # The worker died on jobs[i]: XLA aborted the process.
            name = os.path.basename(jobs[i]["path"])
            if name in args.known:
                known += 1
            else:
                failed += 1
            print(f"FAIL {name}: XLA aborted the process loading our proto (or the original)")
            i += 1
    for name in matched_known:
        print(f"listed as a known difference, but matches now (remove its line): {name}")
    total = ok + roundtrip + failed + known
    what = "reader" if args.read_dir else "writer"
    print(f"proto conformance ({what}): {ok + roundtrip} of {total} modules match "
          f"({roundtrip} same as XLA's own round trip, {known} known differences, {skipped} skipped)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
