/* -*- P4_16 -*-
 * Meters, written for the differential test: a packets meter and a bytes
 * meter indexed by the destination's last byte (cells 0-7; cell 7 is left
 * unconfigured: always green), and a direct meter on a table of sources (one
 * of its entries unconfigured; a miss leaves the color field alone). Their
 * colors are written into the frame (the IPv4 TOS byte, 2 bits each), so the
 * egress bytes show every color. The test
 * configures them with rate 0 and small bursts, so the colors depend only on
 * the order of the frames, never on when they arrive. */
#include <core.p4>
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<2> c_pkts; bit<2> c_bytes; bit<2> c_direct; bit<2> seen;
    bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> src; bit<32> dst;
}

struct headers_t { ethernet_t ethernet; ipv4_t ipv4; }
struct meta_t { bit<2> direct_color; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta,
         inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { pkt.extract(hdr.ipv4); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    meter<bit<32>>(8, MeterType.packets) by_packets;
    meter<bit<32>>(8, MeterType.bytes) by_bytes;
    direct_meter<bit<2>>(MeterType.packets) per_source;

    action drop() { mark_to_drop(sm); }
    action route(bit<9> port) { sm.egress_spec = port; }
    action police() { per_source.read(meta.direct_color); }
    table sources {
        key = { hdr.ipv4.src: exact; }
        actions = { police; NoAction; }
        default_action = NoAction();
        meters = per_source;
        size = 16;
    }
    table routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; }
        default_action = drop();
        size = 64;
    }
    apply {
        if (!hdr.ipv4.isValid()) { drop(); return; }
        routes.apply();
        bit<32> i = (bit<32>)hdr.ipv4.dst[7:0] & 7;
        by_packets.execute_meter(i, hdr.ipv4.c_pkts);
        by_bytes.execute_meter(i, hdr.ipv4.c_bytes);
        meta.direct_color = 3;
        sources.apply();
        hdr.ipv4.c_direct = meta.direct_color;
        hdr.ipv4.seen = 1;
        if (hdr.ipv4.c_pkts == 2 && hdr.ipv4.ttl == 1) { drop(); }
    }
}

control Egr(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
