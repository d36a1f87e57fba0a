/* kclock FILE: byte-range (fcntl) and whole-file (flock) locks on FILE, driven by commands.
 *
 * Reads one command a line from stdin and answers each with one line on stdout (flushed),
 * so a shell can drive it through two FIFOs and keep its locks held between commands:
 *
 *   setlk  w|r|u START LEN     fcntl(F_SETLK)            -> ok ms=N | err=EAGAIN(11) ms=N
 *   setlkw w|r|u START LEN     fcntl(F_SETLKW) (alarm: KCLOCK_ALARM s, default 150)
 *   getlk  w|r START LEN       fcntl(F_GETLK)            -> ok unlocked | ok locked type=w start= len= pid=
 *   flock  ex|sh|un [nb]       flock(2)
 *   child  CMD...              a forked process opens FILE itself (another lock owner, another
 *                              open file), runs CMD, answers "child <answer>", exits (its locks go)
 *   bg     CMD...              as child, in the background: answers "bg started pid=N" at once
 *   bgpoll                     -> pending | bg <answer> | none
 *   bgwait SECS                -> bg <answer> | timeout
 *   bgkill                     kills the background child
 *   sleep MS | quit
 * The FILE is opened O_RDWR|O_CREAT by the main process at start (its locks: the "parent" owner).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static pid_t bg_pid = -1;
static int bg_fd = -1;

static const char *ename(int e)
{
	switch (e) {
	case EAGAIN: return "EAGAIN";
	case EACCES: return "EACCES";
	case EINTR: return "EINTR";
	case ENOLCK: return "ENOLCK";
	case EDEADLK: return "EDEADLK";
	case EIO: return "EIO";
	case EBADF: return "EBADF";
	case EINVAL: return "EINVAL";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ENOENT: return "ENOENT";
	case ESTALE: return "ESTALE";
	case ERESTART: return "ERESTART";
	default: return "E?";
	}
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_alarm(int sig) { (void)sig; }

/* Runs one command on fd; writes the answer (no newline) into out. */
static void run(int fd, char *line, char *out, size_t outsz)
{
	char *argv[8];
	int argc = 0;
	for (char *t = strtok(line, " \t\r\n"); t && argc < 8; t = strtok(NULL, " \t\r\n"))
		argv[argc++] = t;
	if (argc == 0) { snprintf(out, outsz, "err=empty"); return; }
	const char *c = argv[0];
	double t0 = now_ms();
	int rc = -1, e = 0;
	if (!strcmp(c, "setlk") || !strcmp(c, "setlkw") || !strcmp(c, "getlk")) {
		if (argc < 4) { snprintf(out, outsz, "err=usage"); return; }
		struct flock fl = { 0 };
		fl.l_type = argv[1][0] == 'w' ? F_WRLCK : argv[1][0] == 'r' ? F_RDLCK : F_UNLCK;
		fl.l_whence = SEEK_SET;
		fl.l_start = atoll(argv[2]);
		fl.l_len = atoll(argv[3]);
		int cmd = !strcmp(c, "setlk") ? F_SETLK : !strcmp(c, "setlkw") ? F_SETLKW : F_GETLK;
		if (cmd == F_SETLKW) {
			const char *a = getenv("KCLOCK_ALARM");
			alarm(a ? atoi(a) : 150);
		}
		rc = fcntl(fd, cmd, &fl);
		e = errno;
		alarm(0);
		double ms = now_ms() - t0;
		if (rc != 0)
			snprintf(out, outsz, "err=%s(%d) ms=%.0f", ename(e), e, ms);
		else if (cmd == F_GETLK && fl.l_type == F_UNLCK)
			snprintf(out, outsz, "ok unlocked ms=%.0f", ms);
		else if (cmd == F_GETLK)
			snprintf(out, outsz, "ok locked type=%s start=%lld len=%lld pid=%d ms=%.0f",
				 fl.l_type == F_WRLCK ? "w" : "r", (long long)fl.l_start,
				 (long long)fl.l_len, (int)fl.l_pid, ms);
		else
			snprintf(out, outsz, "ok ms=%.0f", ms);
		return;
	}
	if (!strcmp(c, "flock")) {
		if (argc < 2) { snprintf(out, outsz, "err=usage"); return; }
		int op = !strcmp(argv[1], "ex") ? LOCK_EX : !strcmp(argv[1], "sh") ? LOCK_SH : LOCK_UN;
		if (argc > 2 && !strcmp(argv[2], "nb"))
			op |= LOCK_NB;
		else if (!(op & LOCK_UN)) {
			const char *a = getenv("KCLOCK_ALARM");
			alarm(a ? atoi(a) : 150);
		}
		rc = flock(fd, op);
		e = errno;
		alarm(0);
		double ms = now_ms() - t0;
		if (rc != 0)
			snprintf(out, outsz, "err=%s(%d) ms=%.0f", ename(e), e, ms);
		else
			snprintf(out, outsz, "ok ms=%.0f", ms);
		return;
	}
	if (!strcmp(c, "sleep")) {
		usleep((useconds_t)(argc > 1 ? atoi(argv[1]) : 0) * 1000);
		snprintf(out, outsz, "ok");
		return;
	}
	snprintf(out, outsz, "err=unknown-command");
}

/* Forks a process that opens the file itself and runs the rest of line; returns its pid and
 * the read end of a pipe that gets its answer. */
static pid_t spawn(const char *rest, int *rfd)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		char out[256], buf[256];
		snprintf(buf, sizeof buf, "%s", rest);
		int fd = open(path, O_RDWR | O_CREAT, 0666);
		if (fd < 0)
			snprintf(out, sizeof out, "err=open-%s(%d)", ename(errno), errno);
		else
			run(fd, buf, out, sizeof out);
		dprintf(p[1], "%s\n", out);
		_exit(0);
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

/* Reads a child's answer line from fd (waiting up to ms; -1 = forever). 1 = got it. */
static int answer(int fd, int ms, char *out, size_t outsz)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	ssize_t n = read(fd, out, outsz - 1);
	if (n <= 0) { snprintf(out, outsz, "err=child-died"); return 1; }
	out[n] = 0;
	char *nl = strchr(out, '\n');
	if (nl) *nl = 0;
	return 1;
}

static void reap_bg(void)
{
	if (bg_pid > 0) { waitpid(bg_pid, NULL, 0); bg_pid = -1; }
	if (bg_fd >= 0) { close(bg_fd); bg_fd = -1; }
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE  (commands on stdin; see kclock.c)\n", argv[0]);
		return 2;
	}
	path = argv[1];
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART: F_SETLKW gets EINTR */
	sigaction(SIGALRM, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int fd = open(path, O_RDWR | O_CREAT, 0666);
	if (fd < 0) {
		printf("err=open-%s(%d)\n", ename(errno), errno);
		return 1;
	}
	printf("ready pid=%d\n", (int)getpid());
	char line[256], out[256];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\r\n")] = 0;
		if (!strcmp(line, "quit"))
			break;
		if (!strncmp(line, "child ", 6)) {
			int rfd;
			pid_t pid = spawn(line + 6, &rfd);
			if (pid < 0) { printf("err=fork\n"); continue; }
			answer(rfd, -1, out, sizeof out);
			close(rfd);
			waitpid(pid, NULL, 0);
			printf("child %s\n", out);
		} else if (!strncmp(line, "bg ", 3)) {
			if (bg_pid > 0) { printf("err=bg-busy\n"); continue; }
			bg_pid = spawn(line + 3, &bg_fd);
			if (bg_pid < 0) { printf("err=fork\n"); continue; }
			printf("bg started pid=%d\n", (int)bg_pid);
		} else if (!strcmp(line, "bgpoll")) {
			if (bg_pid < 0) printf("none\n");
			else if (answer(bg_fd, 0, out, sizeof out)) { reap_bg(); printf("bg %s\n", out); }
			else printf("pending\n");
		} else if (!strncmp(line, "bgwait", 6)) {
			int secs = line[6] ? atoi(line + 7) : 60;
			if (bg_pid < 0) printf("none\n");
			else if (answer(bg_fd, secs * 1000, out, sizeof out)) { reap_bg(); printf("bg %s\n", out); }
			else printf("timeout\n");
		} else if (!strcmp(line, "bgkill")) {
			if (bg_pid > 0) kill(bg_pid, SIGKILL);
			reap_bg();
			printf("ok\n");
		} else {
			run(fd, line, out, sizeof out);
			printf("%s\n", out);
		}
	}
	if (bg_pid > 0) kill(bg_pid, SIGKILL);
	reap_bg();
	return 0;
}
