// Package chaintest holds tests of the repository's task chain (Taskfile.yml,
// .taskrc.yml and the mise files) run through the real task and mise
// binaries. It has no code of its own.
package chaintest
