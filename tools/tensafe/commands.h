/* Subcommands of the `tensafe` tool. Each returns the process exit code
 * (0 success, 1 failure with one line on stderr, 2 usage error). */
#ifndef TENSAFE_TOOL_COMMANDS_H
#define TENSAFE_TOOL_COMMANDS_H

int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_encrypt(int argc, char **argv);
int cmd_decrypt(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_client(int argc, char **argv);
int cmd_adapter(int argc, char **argv);
int cmd_params(int argc, char **argv);
int cmd_lora(int argc, char **argv);
int cmd_generate(int argc, char **argv);

/* One clear error line: "tensafe: <what>: <status name> (<message>)". */
int tool_fail(const char *what, int status);
/* Usage error line, exit code 2. */
int tool_usage(const char *fmt, ...);

#endif
