/* dircache.c - does a directory listing kept open show a change made a moment before?
 *
 * Run in the kclient guest on a cifs (or NFS) mount. It keeps DIR open, reads it whole,
 * makes one change per pass and reads it again, both after rewinddir(3) and through a
 * fresh opendir(3), for N names:
 *   unlink      N files exist; each pass unlinks one; the listing must no longer show it
 *   rename-out  each pass renames one into a subdirectory; the listing must not show it
 *   create-in   each pass creates one; the listing must show it
 * A Linux cifs client that holds a lease on the directory answers these reads from the
 * listing it cached; it is right only if the server's lease break reached it before the
 * answer to the change. Every pass checks the whole listing (the names of this run).
 *
 * A create is checked through fresh opendirs only: the 6.1 client answers a rewound read
 * from the search buffer of that open directory unless it marked the directory changed
 * itself, which its unlink and rename do and its create does not, whatever the server (it
 * fails against Samba, which grants no directory lease); worse, that stale replay fills
 * the listing cache of the lease the client takes next, so a kept-open directory would
 * spoil the fresh opendirs too. For create-in the directory is listed once to fill the
 * client's cache under the lease, closed, and each pass lists it through a new opendir.
 *
 * usage: dircache MODE DIR N
 * prints: DIRCACHE mode=M files=N passes=P wrong=W first_wrong=I errors=E
 * exit 0 iff every pass saw the right listing and nothing failed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 10000

static char prefix[64];
static int n_files;
/* present[i]: name i should be listed now. */
static unsigned char present[MAX_FILES];
static unsigned char seen[MAX_FILES];

static void name_of(int i, char *buf, size_t len, const char *dir) {
	snprintf(buf, len, "%s/%s%05d", dir, prefix, i);
}

/* Index of a listed name of this run, or -1. */
static int index_of(const char *name) {
	size_t pl = strlen(prefix);
	if (strncmp(name, prefix, pl) != 0)
		return -1;
	char *end;
	long i = strtol(name + pl, &end, 10);
	if (*end != '\0' || i < 0 || i >= n_files)
		return -1;
	return (int)i;
}

/* Reads the whole listing from the start; returns how many names are wrong (listed but
 * gone, or missing though present), -1 on a read error. */
static int check_listing(DIR *d, int pass, const char *mode) {
	memset(seen, 0, sizeof seen);
	rewinddir(d);
	errno = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int i = index_of(e->d_name);
		if (i >= 0)
			seen[i] = 1;
	}
	if (errno != 0) {
		printf("DIRCACHE-ERR mode=%s pass=%d readdir: %s\n", mode, pass, strerror(errno));
		return -1;
	}
	static int printed;
	int wrong = 0;
	for (int i = 0; i < n_files; i++) {
		if (seen[i] != present[i]) {
			if (wrong < 3 && printed++ < 20)
				printf("DIRCACHE-WRONG mode=%s pass=%d name=%s%05d listed=%d should=%d\n", mode, pass,
				       prefix, i, seen[i], present[i]);
			wrong++;
		}
	}
	return wrong;
}

static int make_file(const char *path) {
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (fd < 0)
		return -1;
	return close(fd);
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: dircache unlink|rename-out|create-in DIR N\n");
		return 2;
	}
	const char *mode = argv[1], *dir = argv[2];
	n_files = atoi(argv[3]);
	if (n_files <= 0 || n_files > MAX_FILES)
		return 2;
	int unlink_mode = !strcmp(mode, "unlink"), rename_mode = !strcmp(mode, "rename-out"),
	    create_mode = !strcmp(mode, "create-in");
	if (!unlink_mode && !rename_mode && !create_mode)
		return 2;
	snprintf(prefix, sizeof prefix, "dc-%s-%d-", mode, (int)getpid());
	char path[4096], to[8192], sub[4096];
	snprintf(sub, sizeof sub, "%s/%sout", dir, prefix);
	int errors = 0;
	if (rename_mode && mkdir(sub, 0755) != 0) {
		printf("DIRCACHE-ERR mkdir %s: %s\n", sub, strerror(errno));
		return 1;
	}
	if (!create_mode) {
		for (int i = 0; i < n_files; i++) {
			name_of(i, path, sizeof path, dir);
			if (make_file(path) != 0) {
				printf("DIRCACHE-ERR create %s: %s\n", path, strerror(errno));
				return 1;
			}
			present[i] = 1;
		}
	}
	DIR *d = opendir(dir);
	if (!d) {
		printf("DIRCACHE-ERR opendir %s: %s\n", dir, strerror(errno));
		return 1;
	}
	int wrong_passes = 0, first_wrong = -1, passes = 0;
	if (check_listing(d, -1, mode) != 0)
		errors++;
	if (create_mode) {
		closedir(d);
		d = NULL;
	}
	for (int i = 0; i < n_files; i++) {
		name_of(i, path, sizeof path, dir);
		int r;
		if (unlink_mode) {
			r = unlink(path);
		} else if (rename_mode) {
			snprintf(to, sizeof to, "%s/%s%05d", sub, prefix, i);
			r = rename(path, to);
		} else {
			r = make_file(path);
		}
		if (r != 0) {
			printf("DIRCACHE-ERR pass=%d %s: %s\n", i, path, strerror(errno));
			errors++;
			break;
		}
		present[i] = create_mode;
		int rewound = d ? check_listing(d, i, mode) : 0;
		DIR *fresh = opendir(dir);
		int reopened = fresh ? check_listing(fresh, i, mode) : -1;
		if (fresh)
			closedir(fresh);
		passes++;
		if (rewound < 0 || reopened < 0) {
			errors++;
			break;
		}
		if (rewound > 0 || reopened > 0) {
			wrong_passes++;
			if (first_wrong < 0)
				first_wrong = i;
		}
	}
	if (d)
		closedir(d);
	/* Leave the directory as it was. */
	for (int i = 0; i < n_files; i++) {
		name_of(i, path, sizeof path, dir);
		unlink(path);
		if (rename_mode) {
			snprintf(to, sizeof to, "%s/%s%05d", sub, prefix, i);
			unlink(to);
		}
	}
	if (rename_mode)
		rmdir(sub);
	printf("DIRCACHE mode=%s files=%d passes=%d wrong=%d first_wrong=%d errors=%d\n", mode, n_files, passes,
	       wrong_passes, first_wrong, errors);
	return (wrong_passes == 0 && errors == 0 && passes == n_files) ? 0 : 1;
}
