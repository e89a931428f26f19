/*
 * gai looks a name up with getaddrinfo(3) of the C library it is linked
 * with (AF_INET, SOCK_STREAM: each address once) and prints each address
 * on a line. TestTruncatedClients builds it with musl-gcc -static (Debian's
 * musl 1.2.3, which has no TCP fallback for a truncated UDP answer) and
 * runs it in a pod of the real node.
 *
 *	gai NAME
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv)
{
	struct addrinfo hints, *res, *ai;
	char buf[INET_ADDRSTRLEN];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: gai NAME\n");
		return 2;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(argv[1], NULL, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "gai: %s: %s\n", argv[1], gai_strerror(rc));
		return 1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ai->ai_addr;
		if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) != NULL)
			puts(buf);
	}
	freeaddrinfo(res);
	return 0;
}
