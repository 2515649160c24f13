/* Opening input files: the only way a driver opens a `file` (docs/nca-process-protocol.md).
 *
 * The control plane checks a read's paths when the job is submitted, but the files are opened
 * later, when a phase starts: a data file replaced by a symlink to a file outside the data root in
 * between must not be read. So the check is repeated by the kernel at open time. With `root PATH`
 * the files are relative to the root and opened beneath it:
 *
 *   openat2(root_fd, path, {O_RDONLY | O_CLOEXEC, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})
 *
 * A symlink that stays inside the root is followed (the control plane allows those), one that
 * leads outside fails with EXDEV, as do `..` above the root and absolute symlinks (RESOLVE_BENEATH
 * refuses those even when they point back inside; the control plane sends real paths, so only a
 * link planted after the submit can meet that). Without `root` (a process driven by hand, or a
 * deployer whose hosts declare no data root) a file is opened by the path given, but no symlink on
 * it is followed (RESOLVE_NO_SYMLINKS): the control plane's paths are real paths, every symlink
 * already resolved and checked, so a symlink found now was planted since.
 *
 * Where openat2 is missing (ENOSYS: kernels before 5.6; EPERM: some seccomp filters), the same
 * rules are applied by walking the path one component at a time with O_PATH | O_NOFOLLOW and
 * resolving each symlink here (walk_open), so the kernel never follows one on its own. Refusing
 * instead would leave such nodes unable to read anything; the walk is a few syscalls per
 * component, once per file. What the walk cannot see, and openat2 can: a directory it already
 * holds being moved out of the root while it walks (the files under it stay files the mover could
 * already reach). `param files.openat2 0` takes the walk on any kernel, for tests.
 *
 * Every input is also opened O_NONBLOCK and checked to be a regular file before it is used, so a
 * FIFO planted as a data file fails the phase instead of blocking it for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#endif
#endif

#include "jgrt.h"

#ifndef RESOLVE_BENEATH /* headers older than the kernels that have it: the ABI is fixed */
struct open_how {
  uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#endif
#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture but alpha */
#endif

#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
#define MAX_SYMLINKS 40 /* as the kernel's own limit */

/* Set once a call said ENOSYS: the rest of the process walks without asking again. */
static int openat2_missing;

void jgr_set_root(jgr_proc *p, const char *path) {
  if (p->root) {
    free(p->root);
    if (p->root_fd >= 0) close(p->root_fd);
  }
  p->root = strdup(path);
  /* Opened now, by the path as given (the root is the control plane's own setting, so symlinks in
   * it are fine): every file is then resolved against this directory, not against the name. A
   * root that cannot be opened fails the first file that needs it, naming the file. */
  p->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  p->root_errno = p->root_fd < 0 ? errno : 0;
}

/* The portable resolution (see the top of this file). `beneath`: as RESOLVE_BENEATH from `start`
 * (absolute paths and symlink targets, and `..` above `start`, fail with EXDEV; other symlinks are
 * followed); otherwise as RESOLVE_NO_SYMLINKS from the working directory or `/` (any symlink fails
 * with ELOOP). Returns a descriptor opened with `flags`, or -1 with errno set. */
static int walk_open(int start, const char *path, int beneath, int flags) {
  size_t cap = 16, depth = 0; /* dirs[0 .. depth]: the directories walked down, the last current */
  int *dirs = malloc(cap * sizeof *dirs);
  char *buf = strdup(path); /* what is left to resolve; replaced when a symlink is expanded */
  int fd = -1, err = 0, links = 0;
  if (!dirs || !buf) {
    err = ENOMEM;
    goto out;
  }
  dirs[0] = -1;
  if (path[0] == '/' && beneath) {
    err = EXDEV;
    goto out;
  }
  dirs[0] = beneath ? fcntl(start, F_DUPFD_CLOEXEC, 0) : open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirs[0] < 0 || !*path) {
    err = dirs[0] < 0 ? errno : ENOENT;
    goto out;
  }
  for (char *p = buf;;) {
    while (*p == '/') p++;
    if (!*p) { /* the path ends with `/`, `.` or `..`: a directory, never an input file */
      err = EISDIR;
      goto out;
    }
    char *next = p + strcspn(p, "/");
    int last = next[strspn(next, "/")] == 0;
    char saved = *next;
    *next = 0; /* p is now one component */
    if (strcmp(p, ".") == 0 || strcmp(p, "..") == 0) {
      if (p[1] == '.' && depth > 0) {
        close(dirs[depth--]); /* the physical parent: the directory it was reached from */
      } else if (p[1] == '.' && beneath) {
        err = EXDEV;
        goto out;
      } else if (p[1] == '.') {
        int up = openat(dirs[0], "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up < 0) {
          err = errno;
          goto out;
        }
        close(dirs[0]);
        dirs[0] = up;
      }
      *next = saved;
      p = next;
      continue;
    }
    int o = openat(dirs[depth], p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (o < 0 || fstat(o, &st) != 0) {
      err = errno;
      if (o >= 0) close(o);
      goto out;
    }
    if (S_ISLNK(st.st_mode)) {
      if (!beneath || ++links > MAX_SYMLINKS) {
        close(o);
        err = ELOOP;
        goto out;
      }
      /* read through the descriptor just opened (an O_PATH link and an empty path): the link
       * judged is the link expanded, whatever happens to its name meanwhile */
      char target[PATH_MAX];
      ssize_t k = readlinkat(o, "", target, sizeof target);
      err = errno;
      close(o);
      if (k < 0) goto out;
      if (k == 0 || k == (ssize_t)sizeof target || target[0] == '/') {
        err = k == 0 ? ENOENT : target[0] == '/' ? EXDEV : ENAMETOOLONG; /* RESOLVE_BENEATH refuses absolute links */
        goto out;
      }
      /* the rest of the path continues from the link's directory with the link's target */
      *next = saved;
      size_t rest = strlen(next), n = (size_t)k + rest + 1;
      char *nb = n <= 4 * PATH_MAX ? malloc(n) : NULL;
      if (!nb) {
        err = n <= 4 * PATH_MAX ? ENOMEM : ENAMETOOLONG;
        goto out;
      }
      memcpy(nb, target, (size_t)k);
      memcpy(nb + k, next, rest + 1);
      free(buf);
      buf = p = nb;
      err = 0;
      continue;
    }
    if (!S_ISDIR(st.st_mode) && (!last || saved == '/')) { /* `file/x` or `file/` */
      close(o);
      err = ENOTDIR;
      goto out;
    }
    if (!last) {
      if (depth + 1 == cap) {
        int *nd = realloc(dirs, 2 * cap * sizeof *dirs);
        if (!nd) {
          close(o);
          err = ENOMEM;
          goto out;
        }
        dirs = nd, cap *= 2;
      }
      dirs[++depth] = o;
      *next = saved;
      p = next;
      continue;
    }
    close(o);
    /* O_NOFOLLOW: a symlink swapped in since the look above is refused, not followed */
    fd = openat(dirs[depth], p, flags | O_NOFOLLOW);
    if (fd < 0) err = errno;
    goto out;
  }
out:
  for (size_t i = 0; dirs && i <= depth; i++)
    if (dirs[i] >= 0) close(dirs[i]);
  free(dirs);
  free(buf);
  if (fd < 0) errno = err;
  return fd;
}

/* openat2 when the kernel has it, else the walk; -1 with errno set. */
static int open_resolved(const jgr_proc *p, int dirfd, const char *path, uint64_t resolve) {
  const char *v = jgr_param(p, "files.openat2");
  int use_openat2 = !(v && strcmp(v, "0") == 0) && !__atomic_load_n(&openat2_missing, __ATOMIC_RELAXED);
  if (use_openat2) {
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = OPEN_FLAGS;
    how.resolve = resolve;
    for (int tries = 0;; tries++) {
      long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
      if (fd >= 0) return (int)fd;
      /* EAGAIN: a rename raced a `..` under RESOLVE_BENEATH; the kernel asks to try again */
      if (errno == EAGAIN && tries < 16) continue;
      if (errno == ENOSYS) __atomic_store_n(&openat2_missing, 1, __ATOMIC_RELAXED);
      else if (errno != EPERM) return -1;
      break; /* ENOSYS, or EPERM from a seccomp filter: the walk decides (a real EPERM recurs) */
    }
  }
  return walk_open(dirfd, path, resolve & RESOLVE_BENEATH ? 1 : 0, OPEN_FLAGS);
}

int jgr_open_input(const jgr_proc *p, const char *path, jgr_error *err) {
  const char *why = NULL;
  int fd = -1, e = 0;
  if (p->root) {
    if (path[0] == '/') {
      why = "the path is absolute, but input files are relative to the data root: refused";
    } else if (p->root_fd < 0) {
      jgr_error_set(err, "cannot open input file %s: cannot open the data root %s: %s", path, p->root,
                    strerror(p->root_errno));
      jgr_error_set_file(err, path, 0);
      return -1;
    } else {
      fd = open_resolved(p, p->root_fd, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
      e = errno;
    }
  } else {
    fd = open_resolved(p, AT_FDCWD, path, RESOLVE_NO_SYMLINKS);
    e = errno;
  }
  struct stat st;
  if (!why && fd >= 0 && fstat(fd, &st) != 0) e = errno, close(fd), fd = -1;
  if (!why && fd >= 0 && !S_ISREG(st.st_mode)) {
    close(fd);
    fd = -1;
    why = "it is not a regular file";
  }
  if (!why && fd < 0) {
    if (e == EXDEV)
      why = "it leads outside the data root (a symlink?): refused";
    else if (e == ELOOP && p->root)
      why = "it leads through a symlink loop, or a /proc magic link: refused";
    else if (e == ELOOP)
      why = "it is a symlink or lies under one, and without a data root (`root`) no symlink is followed: refused";
    else if (e == EISDIR)
      why = "it is not a regular file";
    else
      why = strerror(e);
  }
  if (why) {
    jgr_error_set(err, "cannot open input file %s: %s", path, why);
    jgr_error_set_file(err, path, 0);
    return -1;
  }
  /* reads block as usual from here on (O_NONBLOCK only kept a FIFO from blocking the open) */
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}
