"""Runs inside the isolated p4runtime-shell venv (.venv-p4rt-shell), not under pytest.

``python p4rt_shell_script.py GRPC_ADDR P4INFO JSON``: programs the switch the way a P4
user would with p4runtime-shell (device 0, election 0,1), inserts one route, reads it
and counter ``unprioritized_pkts[0]`` back, and prints what it saw as one JSON line for
tests/softswitch/test_ssw_p4rt_shell.py to check.
"""

import json
import sys

import p4runtime_sh.shell as sh


def main() -> None:
    addr, p4info, device_json = sys.argv[1:4]
    sh.setup(
        device_id=0,
        grpc_addr=addr,
        election_id=(0, 1),
        config=sh.FwdPipeConfig(p4info, device_json),
    )
    try:
        te = sh.TableEntry("EchelonIngress.ipv4_lpm")(action="EchelonIngress.ipv4_forward")
        te.match["hdr.ipv4.dstAddr"] = "10.0.1.2/32"
        te.action["dstAddr"] = "00:00:00:00:00:02"
        te.action["port"] = "2"
        te.insert()
        read = list(sh.TableEntry("EchelonIngress.ipv4_lpm").read())
        ce = sh.CounterEntry("EchelonIngress.unprioritized_pkts")
        ce.index = 0
        cells = list(ce.read())
        print(
            json.dumps(
                {
                    "entries": len(read),
                    "prefix_len": read[0].match["hdr.ipv4.dstAddr"].lpm.prefix_len,
                    "port": int.from_bytes(read[0].action["port"].value, "big"),
                    "counter_packets": cells[0].data.packet_count,
                }
            )
        )
    finally:
        sh.teardown()


if __name__ == "__main__":
    main()
