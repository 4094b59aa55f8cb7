# shellcheck shell=bash
# loopback_books.sh - the books of testpmd `io --tx-first` against a uvhost loopback
# port (sourced by serve_vs_testpmd.sh and serve_poll_modes.sh; they define `fail`).
#
# testpmd's --tx-first sends one burst (TXONLY_BURST frames: testpmd's default burst of
# 32); from then on io forwards every frame it receives, so exactly that many frames
# circulate between the two processes. After testpmd stopped forwarding and uvhost
# drained testpmd's TX ring (the connection's end line is read after testpmd exited):
#   1. testpmd's TX == uvhost's "from the guest"             (every frame sent was taken)
#   2. uvhost's "from the guest" == "to the guest" + dropped (loopback reflects or counts
#                                                             a drop: no RX buffer)
#   3. testpmd's TX + TX-dropped == RX + TXONLY_BURST        (io forwards each frame it
#                                                             received, or counts it dropped)
#   4. uvhost's "to the guest" - testpmd's RX ==
#      TXONLY_BURST - testpmd's TX-dropped - uvhost's dropped, and >= 0
# The one count nobody can observe is 4's difference: frames uvhost put into testpmd's
# RX ring after testpmd's last receive (testpmd counts a frame when it takes it from the
# ring, and stops taking when forwarding stops). It is what is left of the circulating
# burst, so it lies in [0, TXONLY_BURST]; 1 to 3 hold exactly.
TXONLY_BURST=${TXONLY_BURST:-32}

# loopback_books TAG TP_TX TP_TX_DROPPED TP_RX SV_FROM SV_TO SV_DROPPED
loopback_books() {
  local tag=$1 tp_tx=$2 tp_txd=$3 tp_rx=$4 sv_from=$5 sv_to=$6 sv_drop=$7
  local unread=$((sv_to - tp_rx))
  ((tp_tx > 0 && tp_rx > 0)) || fail "$tag: a direction carried nothing (testpmd tx=$tp_tx rx=$tp_rx)"
  ((tp_tx == sv_from)) || fail "$tag: testpmd sent $tp_tx, uvhost took $sv_from from the guest"
  ((sv_from == sv_to + sv_drop)) ||
    fail "$tag: uvhost took $sv_from from the guest but delivered $sv_to + dropped $sv_drop = $((sv_to + sv_drop))"
  ((tp_tx + tp_txd == tp_rx + TXONLY_BURST)) ||
    fail "$tag: testpmd sent $tp_tx + dropped $tp_txd, received $tp_rx + its first burst of $TXONLY_BURST"
  ((unread >= 0 && unread == TXONLY_BURST - tp_txd - sv_drop)) ||
    fail "$tag: uvhost delivered $sv_to, testpmd received $tp_rx: $unread unread; want $TXONLY_BURST - $tp_txd - $sv_drop"
  echo "$tag: books: testpmd tx $tp_tx == uvhost took $sv_from == delivered $sv_to + dropped $sv_drop;" \
       "testpmd tx $tp_tx + dropped $tp_txd == rx $tp_rx + $TXONLY_BURST; left unread in testpmd's RX ring: $unread"
}
