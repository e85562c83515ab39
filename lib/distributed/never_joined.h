// Which ranks never joined the collective the others wait in, told from the ranks' hang-watchdog
// statuses: each carries its group's collective_progress() ("issued": the tag of the last
// collective it issued; "pending_tag" and "pending": its oldest one not complete). With NCCL the
// host never waits inside a collective, so a rank that never issued one is seen only this way:
// its peers' oldest pending tag is past its last issued one.
#pragma once
#include <string>
#include <vector>

namespace tr::distributed {

// A sentence for the hang report: "rank 1 never joined nccl collective tag 40 (allreduce (sum) of
// 4.0 KiB f32, DDP bucket 0 of 1), which rank 0 waits in; rank 1 issued up to tag 39", or, when
// every rank issued it, that it has not completed on the ranks that wait. "" when the statuses
// do not tell: no rank waits in a collective, or the group does not number them (issued 0
// everywhere). statuses[r]: rank r's JSON, "" where none arrived (that rank is left out).
std::string describe_never_joined(const std::vector<std::string>& statuses);

}  // namespace tr::distributed
