# The libFuzzer targets, named once: tests/fuzz/CMakeLists.txt builds fuzz_NAME for each (in the
# ASan tree, target `fuzzers` builds them all) and tests/CMakeLists.txt runs each as "fuzz: NAME"
# with seeds from corpus/NAME; tools/fuzz_long.sh reads the list from the set() line below, so keep
# it on one line.
set(VLESSBENCH_FUZZERS http_request http_response vless_header share_link transport_query config banner_line ws_frame ws_upgrade probe_result mux_frame mux_client gun_message client_hello udp_packet dns_query dns_response socks5_udp host_header udp_echo log_query vision_padding sing_mux_header smux_frame yamux_frame h2mux server_timing reality_hello ntp_packet stun_message xhttp_request)
