#!/usr/bin/env python3
"""STAND-IN for `adb` (no phone exists on this machine): replays canned outputs and logs every command.

This is not adb and talks to no device. The outputs below are written to look like what `adb devices -l`,
`getprop` and `dumpsys SurfaceFlinger` print on a Snapdragon 8 Gen 2 phone (Adreno 740); they are a test
fixture, not a capture from a real phone.

Environment:
  FAKE_ADB_DIR        folder for the command log (`commands.jsonl`) and state (`server_starts`)
  FAKE_ADB_LIFETIMES  comma-separated seconds each successive `tvm_rpc server` start lives before it "dies"
                      (exit 1); starts beyond the list run until killed. Default "0.3" (the first one dies).
"""

import json
import os
import sys
import time

DEVICES = """List of devices attached
R5CW12345AB            device usb:1-1 product:kalamaq model:SM_S911B device:dm1q transport_id:3
0123456789ABCDEF       unauthorized usb:1-2 transport_id:4

"""

GETPROP = """[ro.build.fingerprint]: [samsung/dm1qxxx/dm1q:14/UP1A.231005.007/S911BXXS3BWK5:user/release-keys]
[ro.build.version.release]: [14]
[ro.build.version.sdk]: [34]
[ro.board.platform]: [kalama]
[ro.soc.manufacturer]: [QTI]
[ro.soc.model]: [SM8550]
[ro.product.model]: [SM-S911B]
[ro.hardware.egl]: [adreno]
"""

SURFACEFLINGER = """Display 4630946213010494850 HWC layers:
GLES: Qualcomm, Adreno (TM) 740, OpenGL ES 3.2 V@0676.32 (GIT@0e5ec1ae0f, Ifd9f7a4bd4, 1686052327) (Date:06/06/23)
"""


def main(argv):
    state = os.environ.get("FAKE_ADB_DIR", ".")
    with open(os.path.join(state, "commands.jsonl"), "a") as log:
        log.write(json.dumps(argv) + "\n")
    args = list(argv)
    if args[:1] == ["-s"]:
        args = args[2:]
    if args[:2] == ["devices", "-l"]:
        sys.stdout.write(DEVICES)
        return 0
    if args[:1] == ["shell"]:
        command = " ".join(args[1:])
        if command == "getprop":
            sys.stdout.write(GETPROP)
        elif command.startswith("dumpsys SurfaceFlinger"):
            sys.stdout.write(SURFACEFLINGER)
        elif "tvm_rpc server" in command:
            counter = os.path.join(state, "server_starts")
            starts = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
            with open(counter, "w") as handle:
                handle.write(str(starts))
            lifetimes = [float(x) for x in os.environ.get("FAKE_ADB_LIFETIMES", "0.3").split(",") if x]
            if starts <= len(lifetimes):
                time.sleep(lifetimes[starts - 1])
                print("tvm_rpc: stand-in server died", flush=True)
                return 1
            while True:  # until the farm kills it
                time.sleep(1)
        return 0
    if args[:1] in (["push"],):
        sys.stdout.write(f"{args[1]}: 1 file pushed, 0 skipped. 41.2 MB/s (1234567 bytes in 0.029s)\n")
        return 0
    if args[:1] in (["reverse"], ["forward"]):
        if "--remove" not in args:
            sys.stdout.write(args[1].split(":")[1] + "\n" if args[0] == "forward" and args[1] == "tcp:0" else "")
        return 0
    sys.stderr.write(f"stand-in adb: unknown command {argv}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
