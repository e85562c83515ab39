// Seconds since this process started, on the kernel's clock: what `startup_s` in metrics.jsonl
// and the bench's start-up times measure (the dynamic loader and static initialisers included).
#pragma once

namespace tr::train {

// Now minus the process's start time in /proc/self/stat (CLOCK_BOOTTIME, recorded in clock ticks:
// 10 ms steps, so this reads up to 10 ms long, never short). Where /proc is not readable, the
// time since this library's static initialisation.
double seconds_since_process_start();

}  // namespace tr::train
