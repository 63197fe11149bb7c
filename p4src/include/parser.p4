/* Parser and deparser. Anything that is not IPv4/UDP to ECHELON_UDP_PORT is
 * accepted as plain traffic. A truncated echelon header fails extract()
 * (error.PacketTooShort) and leaves hdr.echelon invalid; an unknown version
 * fails verify() *after* the extract, so hdr.echelon stays valid: ingress
 * must therefore test standard_metadata.parser_error before trusting it. */
#ifndef _ECHELON_PARSER_P4_
#define _ECHELON_PARSER_P4_

parser EchelonParser(packet_in packet,
                     out headers_t hdr,
                     inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    /* Only option-less IPv4 is parsed further: with options, the UDP header
     * is not at a fixed offset (ingress drops such packets, see there). Only a
     * first fragment (fragOffset 0) carries the UDP header; later fragments
     * start with payload bytes and are plain traffic. */
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (0, IPV4_IHL_MIN, IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) {
            ECHELON_UDP_PORT: parse_echelon;
            default: accept;
        }
    }

    state parse_echelon {
        packet.extract(hdr.echelon);
        verify(hdr.echelon.version == ECHELON_VERSION, error.EchelonBadVersion);
        transition accept;
    }
}

control EchelonDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.echelon);
    }
}

/* A wrong incoming IPv4 header checksum sets standard_metadata.checksum_error;
 * ingress drops and counts such packets. Only option-less headers are checked
 * (the list covers 20 bytes); ingress drops the others for their IHL first. */
control EchelonVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(
            hdr.ipv4.isValid() && hdr.ipv4.ihl == IPV4_IHL_MIN,
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.dscp,
              hdr.ipv4.ecn,
              hdr.ipv4.totalLen,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.fragOffset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.srcAddr,
              hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

/* TTL and DSCP change in ingress, so the IPv4 checksum is recomputed. The
 * UDP checksum covers neither field and stays valid. */
control EchelonComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.dscp,
              hdr.ipv4.ecn,
              hdr.ipv4.totalLen,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.fragOffset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.srcAddr,
              hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

#endif
