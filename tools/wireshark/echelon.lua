-- Wireshark / tshark dissector for the EchelonFlow header (docs/wire-format.md).
--
--   tshark -X lua_script:tools/wireshark/echelon.lua -r run/pcap/s1/ecs1-1_out.pcap -V
--   wireshark -X lua_script:tools/wireshark/echelon.lua FILE
--   (or copy this file into ~/.local/lib/wireshark/plugins/ to load it always)
--
-- The header is 16 bytes right after UDP, on destination port 0xEC00 (60416):
--   version(4) flags(4) reserved0(8) echelon_id(16) deadline_us(32)
--   flow_index(16) reserved1(16) seq(32), network byte order.
-- echelon/wire.py is the one implementation in the project; this file decodes the
-- same layout for capture tools. Display filter names: echelon.version,
-- echelon.flags, echelon.reserved0, echelon.id, echelon.deadline_us,
-- echelon.flow_index, echelon.reserved1, echelon.seq.

local ECHELON_UDP_PORT = 0xEC00
local HEADER_LEN = 16
local VERSION = 1

local proto = Proto("echelon", "EchelonFlow header")

local f = proto.fields
f.version = ProtoField.uint8("echelon.version", "Version", base.DEC, nil, 0xF0)
f.flags = ProtoField.uint8("echelon.flags", "Flags", base.HEX, nil, 0x0F)
f.reserved0 = ProtoField.uint8("echelon.reserved0", "Reserved", base.HEX)
f.echelon_id = ProtoField.uint16("echelon.id", "Echelon ID", base.DEC)
f.deadline_us = ProtoField.uint32("echelon.deadline_us", "Deadline offset A(j) (us)", base.DEC)
f.flow_index = ProtoField.uint16("echelon.flow_index", "Flow index", base.DEC)
f.reserved1 = ProtoField.uint16("echelon.reserved1", "Reserved", base.HEX)
f.seq = ProtoField.uint32("echelon.seq", "Sequence number", base.DEC)

local ef_short = ProtoExpert.new("echelon.short", "Echelon header truncated",
                                 expert.group.MALFORMED, expert.severity.ERROR)
local ef_version = ProtoExpert.new("echelon.bad_version", "Unknown echelon header version",
                                   expert.group.PROTOCOL, expert.severity.WARN)
proto.experts = { ef_short, ef_version }

local data_dissector = Dissector.get("data")

function proto.dissector(buf, pinfo, tree)
    local len = buf:len()
    pinfo.cols.protocol = "ECHELON"
    local sub = tree:add(proto, buf(0, math.min(len, HEADER_LEN)))
    if len < HEADER_LEN then
        sub:add_proto_expert_info(ef_short,
            string.format("%d bytes, the header needs %d", len, HEADER_LEN))
        pinfo.cols.info = string.format("Echelon (truncated: %d of %d bytes)", len, HEADER_LEN)
        return len
    end
    local version = buf(0, 1):bitfield(0, 4)
    local vitem = sub:add(f.version, buf(0, 1))
    if version ~= VERSION then
        vitem:add_proto_expert_info(ef_version)
    end
    sub:add(f.flags, buf(0, 1))
    sub:add(f.reserved0, buf(1, 1))
    sub:add(f.echelon_id, buf(2, 2))
    sub:add(f.deadline_us, buf(4, 4))
    sub:add(f.flow_index, buf(8, 2))
    sub:add(f.reserved1, buf(10, 2))
    sub:add(f.seq, buf(12, 4))
    local eid, deadline, index, seq =
        buf(2, 2):uint(), buf(4, 4):uint(), buf(8, 2):uint(), buf(12, 4):uint()
    sub:append_text(string.format(", ID %d, flow %d, seq %d, deadline %d us",
                                  eid, index, seq, deadline))
    pinfo.cols.info = string.format("Echelon ID=%d flow=%d seq=%d deadline=%dus len=%d",
                                    eid, index, seq, deadline, len - HEADER_LEN)
    if len > HEADER_LEN then
        data_dissector:call(buf(HEADER_LEN):tvb(), pinfo, tree)
    end
    return len
end

DissectorTable.get("udp.port"):add(ECHELON_UDP_PORT, proto)
