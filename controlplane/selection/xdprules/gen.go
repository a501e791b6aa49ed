package xdprules

//go:generate go tool bpf2go -target bpfel -cc clang-19 -cflags "-O2 -g -Wall -Werror" -tags linux -no-global-types -type input -type output -type rrl_input -type rrl_output Rules rules.c -- -I/usr/include/x86_64-linux-gnu -I../../../bpf
