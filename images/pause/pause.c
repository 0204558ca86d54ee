/* The pod sandbox's process: holds the pod's namespaces and does nothing else. As PID 1 of the
 * pod (shared PID namespace) it reaps orphaned children, and it ends with status 0 on SIGTERM or
 * SIGINT, which the kernel would otherwise ignore for PID 1. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(int argc, char** argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    puts("tightrope pause 3.10");
    return 0;
  }
  struct sigaction stop = {0};
  stop.sa_handler = on_stop;
  sigemptyset(&stop.sa_mask);
  if (sigaction(SIGTERM, &stop, NULL) != 0 || sigaction(SIGINT, &stop, NULL) != 0) {
    perror("pause: sigaction");
    return 1;
  }
  struct sigaction child = {0};
  child.sa_handler = on_child;
  child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  sigemptyset(&child.sa_mask);
  if (sigaction(SIGCHLD, &child, NULL) != 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) {
    pause();
  }
}
