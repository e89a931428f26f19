/*
 * floor: the cheapest UDP DNS "server" there is, the floor of bench/run.sh's
 * cache-hit rows. It reads a batch of datagrams with recvmmsg, sets the QR bit
 * of each, and sends the batch back to the senders with sendmmsg: no parsing,
 * no lookup, no copy. What it costs per answer is the kernel's socket work at
 * that rate on this machine, so every server's hit CPU is also reported as a
 * ratio to it, measured in the same run.
 *
 *   cc -O2 -o floor floor.c && ./floor 127.0.0.1 PORT
 *
 * One blocking socket on one thread, as the pinned servers get one core.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define SIZE 1232

int main(int argc, char **argv) {
  static unsigned char bufs[BATCH][SIZE];
  struct sockaddr_in from[BATCH], addr = {.sin_family = AF_INET};
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  int fd, n, i, sent;

  if (argc != 3 || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
    fprintf(stderr, "usage: floor IPv4 PORT\n");
    return 2;
  }
  addr.sin_port = htons((unsigned short)atoi(argv[2]));
  fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    perror("floor: bind");
    return 1;
  }
  for (;;) {
    for (i = 0; i < BATCH; i++) {
      iov[i].iov_base = bufs[i];
      iov[i].iov_len = SIZE;
      memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
      msgs[i].msg_hdr.msg_name = &from[i];
      msgs[i].msg_hdr.msg_namelen = sizeof from[i];
    }
    /* Block for the first datagram, then take what is queued. */
    n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
    if (n < 0)
      continue;
    for (i = 0; i < n; i++) {
      if (msgs[i].msg_len >= 12)
        bufs[i][2] |= 0x80; /* QR: a response */
      iov[i].iov_len = msgs[i].msg_len;
    }
    for (sent = 0; sent < n;) {
      i = sendmmsg(fd, msgs + sent, (unsigned)(n - sent), 0);
      if (i <= 0)
        break;
      sent += i;
    }
  }
}
