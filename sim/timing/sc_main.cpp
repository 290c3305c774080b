// libsystemc's main() wants an sc_main; tpusim has its own entry points and never calls it.
// C linkage, as sysc/kernel/sc_externs.h declares it.
extern "C" int sc_main(int, char**) { return 1; }
