/* DPDK for the UDP transport (docs/udp-transport.md, "DPDK"): the runtime's UDP output and input
 * (out_udp.c, in_udp.c) send and receive through one DPDK Ethernet port instead of kernel sockets
 * when `param udp.dpdk EAL-ARGS` is set. Built only where pkg-config finds libdpdk (`make dpdk`)
 * and linked only into NCAs built with it (build.py `dpdk=True`); it registers itself in
 * `jgr_dpdk` from a constructor, so the rest of the runtime never depends on DPDK.
 *
 * Parameters: `udp.dpdk` EAL arguments (e.g. "-l 0 --no-huge -m 256 --no-shconf
 * --vdev=net_af_packet0,iface=veth1"); `--no-pci` is added unless the arguments name PCI devices
 * (-a/--allow/-b), so a test never takes the machine's own NIC. `udp.dpdk.ip` this side's IPv4
 * address; `udp.dpdk.peer_mac` the next hop's MAC (there is no ARP); `udp.dpdk.port` the DPDK port
 * id (default 0). Each worker sends on its own TX queue; worker 0 receives on RX queue 0. A device
 * with fewer TX queues than workers (af_packet has one unless given qpairs=N) is shared: workers on
 * the same queue take turns under that queue's mutex, since a DPDK queue is not thread-safe.
 *
 * Frames: Ethernet, IPv4 (no options, checksum computed here), UDP (checksum 0, allowed in IPv4),
 * then the datagram. Sending copies each datagram into an mbuf (the records stay in the port's
 * buffer); receiving hands out pointers into the mbufs until rx_release.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include "jg_udp.h"
#include "jgrt.h"

#define NB_MBUF 16383
#define RING_SIZE 1024
#define BURST 64
#define FRAME_HDR (RTE_ETHER_HDR_LEN + sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int state; /* 0 not yet, 1 ready, -1 failed */
static char init_error[512];
static uint16_t port_id;
static struct rte_mempool *pool;
static struct rte_ether_addr own_mac, peer_mac;
static uint32_t own_ip; /* network order */
static int tx_shared;   /* more workers than TX queues: queues are locked */
static pthread_mutex_t tx_mu[RTE_MAX_QUEUES_PER_PORT];

static int parse_mac(const char *s, struct rte_ether_addr *m) {
  unsigned b[6];
  if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6) return -1;
  for (int i = 0; i < 6; i++) m->addr_bytes[i] = (uint8_t)b[i];
  return 0;
}

static int init_locked(jgr_proc *p) {
  const char *args = jgr_param(p, "udp.dpdk");
  char *copy = strdup(args ? args : "");
  char *argv[64];
  int argc = 0, pci = 0;
  argv[argc++] = "jumpgate-nca";
  for (char *t = strtok(copy, " "); t && argc < 62; t = strtok(NULL, " ")) {
    if (!strcmp(t, "-a") || !strncmp(t, "--allow", 7) || !strcmp(t, "-b") || !strncmp(t, "--block", 7) ||
        !strcmp(t, "--no-pci"))
      pci = 1;
    argv[argc++] = t;
  }
  if (!pci) argv[argc++] = "--no-pci"; /* never the machine's own NIC unless asked for by name */
  argv[argc] = NULL;
  rte_openlog_stream(stderr); /* EAL logs to stdout by default: that is the NCA's event channel */
  /* ... and prints its usage there on bad arguments: point fd 1 at stderr while it parses them */
  fflush(stdout);
  int saved_stdout = dup(1);
  if (saved_stdout >= 0) dup2(2, 1);
  int eal = rte_eal_init(argc, argv);
  fflush(stdout);
  if (saved_stdout >= 0) dup2(saved_stdout, 1), close(saved_stdout);
  if (eal < 0) {
    snprintf(init_error, sizeof init_error, "DPDK EAL init failed (%s): %s", args, rte_strerror(rte_errno));
    return -1;
  }
  uint64_t port;
  jgr_error e = {0};
  if (jgr_param_u64(p, "udp.dpdk.port", 0, 0, RTE_MAX_ETHPORTS - 1, &port, &e) != 0 || !rte_eth_dev_is_valid_port((uint16_t)port)) {
    snprintf(init_error, sizeof init_error, "DPDK port %llu does not exist (%u ports: give a --vdev)",
             (unsigned long long)port, rte_eth_dev_count_avail());
    return -1;
  }
  port_id = (uint16_t)port;
  const char *ip = jgr_param(p, "udp.dpdk.ip"), *mac = jgr_param(p, "udp.dpdk.peer_mac");
  if (!ip || inet_pton(AF_INET, ip, &own_ip) != 1) {
    snprintf(init_error, sizeof init_error, "param udp.dpdk.ip (this side's IPv4 address) is missing or bad");
    return -1;
  }
  if (!mac || parse_mac(mac, &peer_mac) != 0) {
    snprintf(init_error, sizeof init_error, "param udp.dpdk.peer_mac (the next hop's MAC, aa:bb:..) is missing or bad");
    return -1;
  }
  pool = rte_pktmbuf_pool_create("jg_udp", NB_MBUF, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
  if (!pool) {
    snprintf(init_error, sizeof init_error, "DPDK mbuf pool: %s (give EAL more memory, -m 256)", rte_strerror(rte_errno));
    return -1;
  }
  uint16_t ntx = (uint16_t)(p->threads > 0 ? p->threads : 1);
  struct rte_eth_conf conf;
  memset(&conf, 0, sizeof conf);
  struct rte_eth_dev_info info;
  rte_eth_dev_info_get(port_id, &info);
  if (ntx > info.max_tx_queues) ntx = info.max_tx_queues;
  tx_shared = p->threads > (int)ntx;
  for (int q = 0; q < RTE_MAX_QUEUES_PER_PORT; q++) pthread_mutex_init(&tx_mu[q], NULL);
  int rc = rte_eth_dev_configure(port_id, 1, ntx, &conf);
  uint16_t nrx = RING_SIZE, ntxd = RING_SIZE;
  if (rc == 0) rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nrx, &ntxd);
  if (rc == 0) rc = rte_eth_rx_queue_setup(port_id, 0, nrx, rte_eth_dev_socket_id(port_id), NULL, pool);
  for (uint16_t q = 0; rc == 0 && q < ntx; q++)
    rc = rte_eth_tx_queue_setup(port_id, q, ntxd, rte_eth_dev_socket_id(port_id), NULL);
  if (rc == 0) rc = rte_eth_dev_start(port_id);
  if (rc != 0) {
    snprintf(init_error, sizeof init_error, "DPDK port %u setup failed: %s", port_id, rte_strerror(-rc));
    return -1;
  }
  rte_eth_promiscuous_enable(port_id);
  rte_eth_macaddr_get(port_id, &own_mac);
  return 0;
}

static int dpdk_init(jgr_proc *p, jgr_error *err) {
  pthread_mutex_lock(&mu);
  if (state == 0) state = init_locked(p) == 0 ? 1 : -1;
  int s = state;
  pthread_mutex_unlock(&mu);
  if (s < 0) jgr_error_set(err, "%s", init_error);
  return s > 0 ? 0 : -1;
}

typedef struct {
  uint16_t queue;
  uint8_t hdr[FRAME_HDR]; /* Ethernet, IPv4, UDP: lengths and checksum filled per datagram */
} dpdk_tx;

static void *tx_open(jgr_proc *p, int worker, const char *host, const char *port, jgr_error *err) {
  struct in_addr dst;
  if (inet_pton(AF_INET, host, &dst) != 1) {
    jgr_error_set(err, "DPDK output: %s is not an IPv4 address (no name resolution on the DPDK path)", host);
    return NULL;
  }
  struct rte_eth_dev_info info;
  rte_eth_dev_info_get(port_id, &info);
  dpdk_tx *t = calloc(1, sizeof *t);
  t->queue = (uint16_t)(worker % (info.nb_tx_queues ? info.nb_tx_queues : 1));
  struct rte_ether_hdr *eth = (struct rte_ether_hdr *)t->hdr;
  rte_ether_addr_copy(&peer_mac, &eth->dst_addr);
  rte_ether_addr_copy(&own_mac, &eth->src_addr);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = own_ip;
  ip->dst_addr = dst.s_addr;
  struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
  udp->src_port = rte_cpu_to_be_16((uint16_t)(20000 + worker));
  udp->dst_port = rte_cpu_to_be_16((uint16_t)atoi(port));
  return t;
}

static int tx_send(void *tx, const uint8_t *const *hdrs, const uint8_t *const *bodies, const uint32_t *lens, size_t n) {
  dpdk_tx *t = tx;
  struct rte_mbuf *m[BURST];
  for (size_t at = 0; at < n;) {
    unsigned k = (unsigned)(n - at < BURST ? n - at : BURST);
    while (rte_pktmbuf_alloc_bulk(pool, m, k) != 0) rte_pause(); /* TX still holds mbufs: wait */
    for (unsigned i = 0; i < k; i++) {
      uint32_t payload = JG_UDP_HEADER + lens[at + i];
      uint8_t *d = (uint8_t *)rte_pktmbuf_append(m[i], (uint16_t)(FRAME_HDR + payload));
      if (!d) {
        rte_pktmbuf_free_bulk(m, k);
        errno = EMSGSIZE;
        return -1;
      }
      memcpy(d, t->hdr, FRAME_HDR);
      struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(d + RTE_ETHER_HDR_LEN);
      struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
      ip->total_length = rte_cpu_to_be_16((uint16_t)(sizeof *ip + sizeof *udp + payload));
      ip->hdr_checksum = 0;
      ip->hdr_checksum = rte_ipv4_cksum(ip);
      udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof *udp + payload));
      memcpy(d + FRAME_HDR, hdrs[at + i], JG_UDP_HEADER);
      memcpy(d + FRAME_HDR + JG_UDP_HEADER, bodies[at + i], lens[at + i]);
    }
    unsigned sent = 0;
    if (tx_shared) pthread_mutex_lock(&tx_mu[t->queue]);
    while (sent < k) sent += rte_eth_tx_burst(port_id, t->queue, m + sent, (uint16_t)(k - sent));
    if (tx_shared) pthread_mutex_unlock(&tx_mu[t->queue]);
    at += k;
  }
  return 0;
}

static void tx_close(void *tx) { free(tx); }

static int rx_burst(int udp_port, const uint8_t **data, uint32_t *lens, void **bufs, int max) {
  struct rte_mbuf *m[BURST];
  uint16_t n = rte_eth_rx_burst(port_id, 0, m, (uint16_t)(max < BURST ? max : BURST));
  int kept = 0;
  for (uint16_t i = 0; i < n; i++) {
    uint8_t *d = rte_pktmbuf_mtod(m[i], uint8_t *);
    uint32_t len = rte_pktmbuf_data_len(m[i]);
    const struct rte_ether_hdr *eth = (const struct rte_ether_hdr *)d;
    const struct rte_ipv4_hdr *ip = (const struct rte_ipv4_hdr *)(eth + 1);
    const struct rte_udp_hdr *udp = (const struct rte_udp_hdr *)(ip + 1);
    if (len >= FRAME_HDR && eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) &&
        ip->version_ihl == RTE_IPV4_VHL_DEF && ip->next_proto_id == IPPROTO_UDP && ip->dst_addr == own_ip &&
        udp->dst_port == rte_cpu_to_be_16((uint16_t)udp_port) && rte_be_to_cpu_16(udp->dgram_len) >= sizeof *udp &&
        FRAME_HDR + rte_be_to_cpu_16(udp->dgram_len) - sizeof *udp <= len) {
      data[kept] = d + FRAME_HDR;
      lens[kept] = rte_be_to_cpu_16(udp->dgram_len) - (uint32_t)sizeof *udp;
      bufs[kept++] = m[i];
    } else {
      rte_pktmbuf_free(m[i]); /* not ours (ARP, other ports, fragments): a host would answer; we drop */
    }
  }
  if (n == 0) usleep(20); /* an idle poll yields the core: NCAs share machines */
  return kept;
}

static void rx_release(void **bufs, int n) {
  for (int i = 0; i < n; i++) rte_pktmbuf_free((struct rte_mbuf *)bufs[i]);
}

static const jgr_dpdk_ops ops = {dpdk_init, tx_open, tx_send, tx_close, rx_burst, rx_release};

__attribute__((constructor)) static void register_dpdk(void) { jgr_dpdk = &ops; }
