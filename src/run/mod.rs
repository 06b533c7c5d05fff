//! Wiring: the command line, settings, and the controller loop that joins watch, decide and
//! publish. Only this stage wires everything.

pub mod cli;
pub mod controller;
