//! The Slurm engine: sessions run as jobs of a Slurm cluster, through slurmrestd.

pub mod client;
