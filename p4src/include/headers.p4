/* Headers and metadata. The echelon header layout is specified byte by byte
 * in docs/wire-format.md and mirrored by the scapy layer echelon/wire.py. */
#ifndef _ECHELON_HEADERS_P4_
#define _ECHELON_HEADERS_P4_

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9>  port_t;
/* A per-echelon counter slot: as wide as the echelon_pkts counter is long. */
typedef bit<CLASS_ID_BITS> class_id_t;

header ethernet_t {
    mac_addr_t dstAddr;
    mac_addr_t srcAddr;
    bit<16>    etherType;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;       /* rewritten from the assigned priority */
    bit<2>      ecn;        /* preserved */
    bit<16>     totalLen;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     fragOffset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdrChecksum;
    ipv4_addr_t srcAddr;
    ipv4_addr_t dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* 16 bytes, network byte order. deadline_us is the flow's ideal-finish
 * offset A(j) inside its EchelonFlow, in microseconds: relative, so the
 * switch needs no clock synchronised with the hosts. */
header echelon_t {
    bit<4>  version;
    bit<4>  flags;
    bit<8>  reserved0;
    bit<16> echelon_id;
    bit<32> deadline_us;
    bit<16> flow_index;
    bit<16> reserved1;
    bit<32> seq;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    echelon_t  echelon;
}

struct metadata_t {
    class_id_t class_id; /* per-echelon counter slot, set by echelon_classify */
    bit<3>     prio;     /* the decision; copied to standard_metadata.priority */
    bit<32>    queue_cell; /* egress: this packet's queue in the telemetry registers */
}

error {
    EchelonBadVersion
}

#endif
