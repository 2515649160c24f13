/* The fork server: a loaded copy of an NCA binary that forks new NCA processes on request
 * (docs/nca-process-protocol.md, "Fork servers").
 *
 * Why: an ORC or Parquet scan spends ~8.5 ms of CPU between exec and `ready`, nearly all of it the
 * dynamic loader relocating Arrow C++ from the pyarrow wheel and the page faults of doing so. A
 * process forked from a copy that has done this once starts in well under a millisecond, and is
 * otherwise the same fresh process: nothing of an earlier job was ever in the server, which runs
 * no job and never touches data. Each child still serves exactly one job.
 *
 * `BINARY --fork-server [ROOM]` serves on its standard input, which must be a Unix SOCK_SEQPACKET socket
 * (message boundaries kept; descriptors passed with SCM_RIGHTS):
 *   request  "cwd\0argv1\0argv2\0..." with three descriptors: the child's stdin, stdout, stderr
 *   reply    "pid N" with one descriptor, a pidfd of the child, or "error TEXT" without one
 *   notice   "exit N CODE" when child N has ended: its exit code, or minus the signal that ended it
 * The server reaps its children itself (so their CPU time is added to its own children's, as a
 * process's is to its parent's), and exits when its socket closes: the control plane is gone. Its
 * children then go on until their own standard input closes, as any NCA does.
 *
 * The server starts no thread (fork copies only the calling thread), and refuses to serve when
 * anything before main has started one, but for jemalloc's background thread (fs_other_threads).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jgrt.h"

#define FS_MAX_REQUEST 65536
#define FS_MAX_ARGS 64

/* The server's own argument area, reused for each child's command line: `ps` and
 * /proc/PID/cmdline then show a child's real arguments (`--bind HOST --inputs N`), which is how
 * operators and tools tell NCAs apart, instead of the server's. The control plane reserves the
 * room with a third argument (jumpgate/agent/fork_server.py), which the server blanks at start. */
static char *title_start, *title_end;

static void fs_title_init(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (argv[i] != argv[i - 1] + strlen(argv[i - 1]) + 1) return; /* not one area: leave titles be */
  title_start = argv[0];
  title_end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
  char *after = argv[1] + strlen(argv[1]) + 1; /* "BINARY\0--fork-server\0", then NULs */
  memset(after, 0, (size_t)(title_end - after));
}

/* In a child: its arguments after the binary's name, as many as fit, NUL-separated. */
static void fs_title(char *const *args, int nargs) {
  if (!title_start) return;
  char *at = title_start + strlen(title_start) + 1, *end = title_end;
  for (int i = 0; i < nargs; i++) {
    size_t n = strlen(args[i]) + 1;
    if (at + n > end) break;
    memcpy(at, args[i], n);
    at += n;
  }
  memset(at, 0, (size_t)(end - at));
}

static void fs_send(const char *text, int fd) {
  struct iovec iov = {(void *)text, strlen(text)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } u;
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    memset(&u, 0, sizeof u);
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof u.buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (sendmsg(0, &msg, MSG_NOSIGNAL) < 0) {
    if (errno != EINTR) _exit(0); /* the control plane is gone */
  }
}

/* Reap every ended child and tell the control plane how each ended. */
static void fs_reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1;
    char text[64];
    snprintf(text, sizeof text, "exit %d %d", (int)pid, code);
    fs_send(text, -1);
  }
}

/* In the child: its descriptors, session, directory and signals, as a fresh start would have. */
static void fs_become(const int fds[3], int sfd, const sigset_t *old_mask, const char *cwd) {
  close(sfd);
  for (int i = 0; i < 3; i++)
    if (dup2(fds[i], i) < 0) _exit(127); /* over fd 0, the server's socket, too */
  for (int i = 0; i < 3; i++)
    if (fds[i] > 2) close(fds[i]);
  setsid(); /* its own process group, which `stop` signals as a whole */
  if (chdir(cwd) != 0) {
    fprintf(stderr, "fork server: cannot enter %s: %s\n", cwd, strerror(errno));
    _exit(127);
  }
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_SETMASK, old_mask, NULL);
}

/* Threads of this process other than this one and jemalloc's background threads; -1 when
 * /proc cannot tell. The pyarrow wheel's libarrow starts one jemalloc background thread in its
 * library initializer, before main; jemalloc's own fork handlers (pthread_atfork: its locks are
 * taken before a fork and reset in the child, where background threads start again when needed)
 * make forking with it safe. Any other thread could hold a lock that no child could ever take. */
static int fs_other_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int others = 0;
  char self[32];
  snprintf(self, sizeof self, "%d", (int)getpid());
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, self) == 0) continue;
    char path[64], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
      fclose(f);
    }
    if (strcmp(comm, "jemalloc_bg_thd\n") != 0) others++;
  }
  closedir(d);
  return others;
}

void jgr_fork_server(int *argc, char ***argv) {
  const char *self = (*argv)[0];
  /* fork copies the calling thread alone: a lock another thread holds would stay held in every
   * child. A thread that has only just started may not have its name yet: look a few times. */
  int others = fs_other_threads();
  for (int tries = 0; others > 0 && tries < 20; tries++) {
    usleep(10000);
    others = fs_other_threads();
  }
  if (others != 0) {
    fprintf(stderr, "%s --fork-server: %s; only a process without other threads forks\n", self,
            others < 0 ? "/proc/self/task cannot be read" : "threads other than jemalloc's run before main");
    exit(2);
  }
  fs_title_init(*argc, *argv);
  int type = 0;
  socklen_t tl = sizeof type;
  if (getsockopt(0, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_SEQPACKET) {
    fprintf(stderr, "%s --fork-server: standard input must be a Unix SOCK_SEQPACKET socket\n", self);
    exit(2);
  }
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old_mask);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    fprintf(stderr, "%s --fork-server: signalfd: %s\n", self, strerror(errno));
    exit(2);
  }
  static char req[FS_MAX_REQUEST + 1];
  for (;;) {
    struct pollfd pfd[2] = {{0, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(pfd, 2, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(1);
    }
    if (pfd[1].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      }
      fs_reap();
    }
    if (!pfd[0].revents) continue;
    union {
      char buf[CMSG_SPACE(3 * sizeof(int))];
      struct cmsghdr align;
    } u;
    struct iovec iov = {req, FS_MAX_REQUEST};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof u.buf;
    ssize_t n = recvmsg(0, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(0); /* end of input: the control plane is gone */
    int fds[3] = {-1, -1, -1}, nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (nfds < 3) fds[nfds++] = fd;
        else close(fd);
      }
    }
    /* the request: NUL-terminated strings, the working directory first, then the arguments */
    req[n] = 0;
    char *args[FS_MAX_ARGS + 2];
    int nargs = 0;
    const char *cwd = req;
    for (char *s = req + strlen(req) + 1; s < req + n && nargs < FS_MAX_ARGS; s += strlen(s) + 1) args[nargs++] = s;
    const char *bad = nfds != 3                                ? "a request carries three descriptors"
                      : (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? "the request is too long"
                      : n == 0 || req[n - 1] != 0               ? "a request ends with a NUL byte"
                      : !*cwd                                  ? "a request names a working directory"
                                                               : NULL;
    /* The reply waits until the child is in its own session: a `stop` that signals the
     * process group right after the reply must find the group. The child closes its end of
     * this pipe once there (or by dying); the read returns then. */
    int sync[2] = {-1, -1};
    if (!bad && pipe2(sync, O_CLOEXEC) != 0) bad = "pipe failed";
    pid_t pid = bad ? -1 : fork();
    if (pid == 0) {
      close(sync[0]);
      fs_become(fds, sfd, &old_mask, cwd);
      close(sync[1]);
      /* argv for jgr_main: this binary's name, then the request's arguments (heap: lives on) */
      char **child = calloc((size_t)nargs + 2, sizeof *child);
      child[0] = (*argv)[0];
      for (int i = 0; i < nargs; i++) child[i + 1] = strdup(args[i]);
      fs_title(child + 1, nargs); /* after the copies: the request lives in the server's buffer */
      *argc = nargs + 1;
      *argv = child;
      return;
    }
    for (int i = 0; i < nfds; i++) close(fds[i]);
    if (sync[1] >= 0) {
      close(sync[1]);
      char c;
      while (read(sync[0], &c, 1) < 0 && errno == EINTR) {
      }
      close(sync[0]);
    }
    if (pid < 0) {
      char text[160];
      snprintf(text, sizeof text, "error %s", bad ? bad : strerror(errno));
      fs_send(text, -1);
      continue;
    }
    /* a pidfd taken before the child can be reaped (it is reaped only here), so it is this child's */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    char text[64];
    snprintf(text, sizeof text, "pid %d", (int)pid);
    fs_send(text, pidfd);
    if (pidfd >= 0) close(pidfd);
  }
}
