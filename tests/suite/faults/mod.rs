//! Faults without loss: a log that cannot be written, a full or failing
//! state disk, a huge read, a double crash, a damaged store, and the memory
//! a finished job keeps. Each test plays the fault for real (a /dev/full
//! stderr, a tmpfs the test mounts and fills, SIGKILLs, garbled files).

mod logging;
