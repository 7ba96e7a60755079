"""The teaching views' sentences, English and Chinese: multi-step, step-through replay, hazard lab
(merged by ``texts.strings``).
"""

from __future__ import annotations

EN: dict[str, str] = {
    # scheduling loops (live tab)
    "ctl_loops": "Scheduling loops to compare",
    "loop_normal": "normal (serial)",
    "loop_overlap": "overlap (one step)",
    "loop_multistep": "multi-step overlap (k steps)",
    "ctl_k": "k (multi-step): forwards per scheduling iteration",
    "ctl_stop_early": "Requests stop early: a stop token per request, picked from a quick probe "
                      "run (shows the lag cost)",
    "preset_help": "**Presets.** One-step overlap hides CPU work up to a forward's length (the "
                   "defaults); multi-step pays off when the scheduler's work is longer than the "
                   "forward.",
    "preset_overlap": "Normal vs overlap (the defaults)",
    "preset_sized_run": "*Measured on {device} ({model}, B = {batch}, {graphs}) in the serial "
                    "loop of your last run (it had {run_extra} µs "
                    "of extra CPU work a step, left out here): a decode step's forward took "
                    "{fwd:.2f} ms and the "
                    "scheduler's own work {cpu:.2f} ms. With {extra} µs of extra CPU work a step "
                    "the CPU's part is "
                    "{forwards:.1f} forwards long. One-step overlap hides up to about {hides} µs "
                    "of extra work (the CPU's part one forward); beyond that, multi-step needs k "
                    "at least the CPU's part in forwards: this setting needs k = {k}, and k = 4 "
                    "hides up to about {k4} µs.*",
    "sizing_lead_hides": "*A forward took {fwd:.2f} ms in your last run; with this much extra CPU "
                         "work the scheduler's part of a step is about {forwards:.1f} forwards "
                         "long, so the overlap loop can hide it under the forward (the run's "
                         "own terms are in its formula fold).*",
    "sizing_lead_multistep": "*A forward took {fwd:.2f} ms in your last run; with this much extra "
                             "CPU work the scheduler's part of a step is about {forwards:.1f} "
                             "forwards long: more than the overlap loop can hide; multi-step "
                             "with k = {k} can (the run's own terms are in its formula fold).*",
    "sizing_plain_hides": "*With this much extra CPU work the scheduler's part of a step is "
                          "shorter than a forward on this machine, so the overlap loop can hide "
                          "it under the forward. Your own run's figures show here after it.*",
    "sizing_plain_multistep": "*With this much extra CPU work the scheduler's part of a step is "
                              "longer than a forward on this machine: more than the overlap loop "
                              "can hide; multi-step with k = {k} can. Your own run's figures show "
                              "here after it.*",
    "sizing_how": "How this was sized",
    "preset_cpu_default": "*CPU mode: {extra} µs of extra CPU work a step, the first click "
                          "measured on this project's 2-core machine (the warm-up has not "
                          "measured this one yet).*",
    "preset_unmeasured": "*The GPU has not been measured (no warm-up ran): CUDA graphs are on; "
                         "for the lesson, set the extra CPU work a little below one forward.*",
    "preset_fixed": "*Extra CPU work {extra} µs a step, as measured on this project's 2-core "
                    "machine (this one has not been measured yet: the warm-up is still on).*",
    "preset_multistep": "A heavy scheduler: multi-step, k = 4",
    "multistep_no_gain": "Here T_sched + T_post ({cpu:.2f} ms) is not longer than T_fwd ({fwd:.2f} "
                         "ms): one-step overlap already hides the CPU's work, so k steps per "
                         "scheduling pass can add only their lag (the wasted tokens below). "
                         "Multi-step is for a scheduler heavier than the forward: try the preset "
                         "“A heavy scheduler”.",
    "status_probe": "Probing: one quick greedy run picks each request's stop token…",
    "error_no_loop": "Nothing to run: choose at least one scheduling loop.",
    "m_wasted_tokens": "wasted tokens (forwards after a stop)",
    "col_wasted": "extra steps after stop ({label})",
    "formula_multistep": "multi-step step ≈ max(T_fwd, (T_sched + T_post) / k) = max({fwd:.2f}, "
                         "{cpu:.2f} / {k}) = {best:.2f} ms",
    "formula_multistep_pred": "predicted speedup of {label} over serial: {pred:.2f}×",
    "cost_title": "the lag cost, measured",
    "cost_wasted": "wasted tokens",
    "cost_share": "{share:.1f}% of its {total} output tokens",
    "cost_ttft": "time to first token",
    # view tabs
    "fold_steps": "Step through",
    "fold_run_more": "KV memory and the generated texts",
    "tab_lab": "Hazard lab",
    # step-through replay
    "replay_help": (
        "**Step through a run**, one decode step at a time (a live run, a recorded GPU run or an "
        "imported record). Bold outlines mark the spans of step *n*: **forward(Bn)** on the "
        "engine stream, the **metadata upload** it waits for (`wait_stream`), the **result copy** "
        "and the CPU's **wait for copy_done**, and the CPU work that runs at the same time. "
        "Arrows link them; hover any outlined bar to see its partners. ★ marks a forward that "
        "still carried a request which had already stopped (lag one: its token is dropped)."),
    "replay_empty": "Show a run first (live, recorded or imported); then step through it here.",
    "replay_no_step": "This run has no step {step}: its steps go from {first} to {last}.",
    "replay_need_step": "The step box is empty: enter a step from {first} to {last}.",
    "ctl_replay_run": "Run to step through",
    "ctl_step": "Step n",
    "ctl_prev": "◀ Previous step",
    "ctl_next": "Next step ▶",
    "unrolled_help": (
        "**The article's three rounds, unrolled, from this run.** *Fill*: the first forward has "
        "nothing to hide, the CPU has no earlier batch to process. *Steady state*: each "
        "process_last(B*n−1*) sits under forward(B*n*); where the CPU's work for a step (with "
        "the next batch's building) is longer than the forward, the GPU still idles for the "
        "difference (red). *Drain*: the last batch is processed with no forward left to hide it. "
        "Each panel has its own time scale."),
    "unrolled_fill": "fill: steps {a}–{b}",
    "unrolled_steady": "steady state: steps {a}–{b}",
    "unrolled_drain": "drain: steps {a}–{b}",
    "cap_overlap": (
        "**Step {n}** ({loop}): the GPU runs forward(B{n}) ({fwd:.2f} ms) while the CPU processes "
        "B{prev} ({proc:.2f} ms): it reads B{prev}'s tokens after copy_done, checks stops, frees "
        "finished requests{then}. {waited}; {hidden:.2f} ms of the CPU's work ran hidden under "
        "it."),
    "cap_then": "; then it builds and launches B{m} ({next:.2f} ms)",
    "cap_extra": " Of process_last(B{m})'s {proc:.2f} ms, {extra:.2f} ms is the extra CPU work this "
                 "run was given (the *Extra CPU work* control, `--extra-cpu-us` on the command "
                 "line), standing in for a heavier scheduler.",
    "cap_overlap_missed": (
        "**Step {n}** ({loop}): the loop launched forward(B{n}) ({fwd:.2f} ms) and then processed "
        "B{prev} ({proc:.2f} ms), as overlap does, but this time the two hardly overlapped in "
        "time: only {hidden:.2f} ms of that work ran under the forward. The device started or "
        "finished the forward away from the CPU's work (on a busy machine a process can wait for "
        "a core)."),
    "cap_fill": (
        "**Step {n}** ({loop}, fill): the GPU runs forward(B{n}) ({fwd:.2f} ms); there is no "
        "earlier batch to process yet, so the CPU goes straight on to build and launch the next "
        "batch, and then has nothing to do but wait for B{n}'s tokens. {waited}."),
    "waited_first": "forward(B{n}) waited for its metadata upload (wait_stream)",
    "waited_copy": "forward(B{n}) waited for B{n}'s metadata upload, the only work on the "
                   "scheduler stream (the result copies run beside the forwards, on the copy "
                   "stream), and, by stream order, for forward(B{prev}), which wrote its input "
                   "tokens into the token pool",
    "waited_engine": "forward(B{n}) waited for B{n}'s metadata upload, the only work on the "
                     "scheduler stream, and, by stream order, for forward(B{prev}) and its result "
                     "copy (on the engine stream, right after sampling)",
    "waited_scheduler": "forward(B{n}) waited for all the scheduler stream held before it "
                        "(wait_stream): copy(B{prev}), which itself waited for forward(B{prev}), "
                        "then B{n}'s upload",
    "waited_in_order": "The device process runs its commands in order, like one stream: "
                       "forward(B{n}) began after copy(B{prev}) and B{n}'s upload",
    "cap_normal": (
        "**Step {n}** (normal loop): the GPU runs forward(B{n}) ({fwd:.2f} ms); then the CPU "
        "waits for copy_done, processes B{n} ({proc:.2f} ms: reads its tokens, checks stops, "
        "frees finished requests) and schedules the next batch. Nothing hides that work: the GPU "
        "idles {idle:.2f} ms before the next forward."),
    "cap_multistep": (
        "**Step {n}** (multi-step, k={k}): forward(B{n}) ({fwd:.2f} ms) took its input tokens from "
        "the token pool, written by the forward before it; up to {k} forwards are launched per "
        "scheduling iteration, so stop checks come up to {k} steps late."),
    "cap_multistep_under": " Under it the CPU processes {batches} ({hidden:.2f} ms hidden).",
    "cap_multistep_none": " Under it the CPU processes no batch: it is launching or waiting.",
    "cap_drain": " This is the last forward (drain): no forward follows to hide the CPU's work.",
    "cap_copy": " B{n}'s tokens come back by copy(B{n}); the CPU blocked {wait:.2f} ms on its "
                "copy_done.",
    "cap_lag": " ★ **Lag:** {items} had already stopped but rode along in B{n}; their tokens from "
               "this forward are dropped.",
    "cap_lag_one": " ★ **Lag:** {items} had already stopped but rode along in B{n}; its token "
                   "from this forward is dropped.",
    "cap_lag_item": "request {req} (stopped at step {stop})",
    "cap_stopped": " Requests {reqs} produced stop tokens in B{n}; the CPU sees them only when "
                   "it processes B{n}.",
    "cap_stopped_one": " Request {reqs} produced a stop token in B{n}; the CPU sees it only when "
                       "it processes B{n}.",
    "cap_none": "**Step {n}**: no forward on the engine stream was recorded for this step.",
    "role_forward": "forward(B{n})",
    "role_upload": "metadata upload(B{n})",
    "role_copy": "result copy(B{n})",
    "role_wait": "CPU wait for copy_done(B{n})",
    "role_process": "process_last(B{n})",
    "role_process_last": "process_last(B{n})",
    "role_receive": "receive(B{n})",
    "role_schedule": "schedule(B{n})",
    "role_launch": "launch(B{n})",
    "rel_waits_for": "waits for {other} (wait_stream)",
    "rel_guards_copy": "{other} waits for this upload, the only work on the scheduler stream",
    "rel_guards_engine": "{other} waits for this upload, the only work on the scheduler stream",
    "rel_guards_scheduler": "{other} waits for this upload and for everything queued before it on "
                            "the scheduler stream (the previous step's result copy)",
    "rel_guards_in_order": "{other} runs after it: the device process runs its commands in order",
    "rel_hides": "hides {other} under it",
    "rel_hidden_under": "runs hidden under {other}",
    "rel_copied_by": "its sampled tokens are copied to the host by {other}",
    "rel_copies": "copies the sampled tokens of {other}; signals copy_done to {partner}",
    "rel_waits_copy": "blocks until copy_done of {other}",
    "rel_after": "runs after {other}, not under it: the GPU idles meanwhile",
    "rel_before": "is followed by {other}; nothing overlaps it",
    "arrow_wait_stream": "wait_stream",
    "arrow_copy_done": "copy_done",
    "arrow_tokens": "tokens → host",
    "arrow_hidden": "hidden under forward(B{n})",
    "lag_extra": "request {req} stopped at step {stop}; this forward is its lag-one extra step, "
                 "its token is dropped",
    "lag_extra_k": "request {req} stopped at step {stop}; this forward is its extra step {nth} of "
                   "{total}, its token is dropped",
    "lag_stop": "request {req}: stop token read here, in process_last(B{stop})",
    "lag_legend": "forward after a stop (token dropped)",
    "lane_busy": "{lane} · busy {busy:.1f}%",
    "lane_kernels_of": "kernels: {stream}",
    "lane_kernels_stream": "kernels: stream {number}",
    "stop_legend": "stop token read",
    # hazard lab
    "lab_help": """
### Hazard lab: remove one safeguard and let the checks find what breaks
Each switch removes one protection of the overlap loop. The lab runs a workload that makes its
safeguard matter: for the slot, buffer and guard switches 24 requests for 4 request slots (so
slots are reused) and 12 new tokens; for the memory switches (the prefix cache and
retraction) prompts that share a system prompt, on a KV pool too small for every request at
full length (the prefix cache finds the shared pages; requests are retracted and resumed), and
40 new tokens. The safe engine takes the first workload for even seeds, the second for odd
ones. Each request stops on a token picked from a probe run (for the finished-request guard,
one token before its length limit). The **normal loop** is the
reference; then the **overlap loop** runs with the switch on, and the lab reports what the
checks found: tokens that differ (which request, from which output token), a double free
caught by the allocator, tokens after a stop, leaked pages or slots, a position read through
two different KV pages, a prefix cache whose accounting broke. Races depend on timing; the lab
widens the window with an injected delay and says so when a run happened not to show the
fault. It uses the model and device chosen on the *Live run* tab, and waits its turn like a
live run.
""",
    "lab_switch": "Safeguard to remove",
    "lab_seed": "workload seed",
    "lab_run": "Run with this safeguard removed",
    "lab_safe": "Run the safe engine (every safeguard on)",
    "lab_guards": "**What it guards, and what goes wrong without it:** {guards}.",
    "lab_cuda_only": " *Needs two CUDA streams.*",
    "lab_mark_cuda": " (needs CUDA: not here)",
    "lab_no_cuda_machine": "**This machine has no GPU, so this switch cannot run here** (on a CPU "
                           "the device process runs commands in order, like one stream, and the "
                           "race cannot happen); choose another switch. Its test runs on CUDA.",
    "lab_no_cuda_device": "**The Live run tab's device is CPU**: choose auto or CUDA there to run "
                          "this switch.",
    "lab_remapped": "Positions read through two different KV pages",
    "lab_remapped_item": "request {request}, position {position}",
    "lab_cache": "Prefix cache accounting broken",
    "lab_stalled": "The run could not go on",
    "lab_memory": "Memory in this run: {retractions} retractions (requests set aside when pages "
                  "ran out), {hits} prompt tokens found in the prefix cache.",
    "lab_idle": "Choose a safeguard and run the lab.",
    "lab_running": "Running the lab on {device}: the normal loop as reference, then the overlap "
                   "loop with {what}…",
    "lab_all_on": "every safeguard on",
    "lab_fault": "Fault found by the checks: {title}",
    "lab_safe_ok": "No fault: every check passed with every safeguard on.",
    "lab_not_shown": "No fault this time",
    "lab_needs_cuda": "Not run here: this switch needs CUDA",
    "lab_windows": "The removed safeguard's race window opened {n} times in this run (tokens "
                   "that came back for a request already finished or retracted, plus slots freed "
                   "while a queued forward still read their token-pool row).",
    "lab_windows_safe": "The safeguards acted {n} times in this run (lag-one tokens dropped): each "
                        "time, without them, a race window would have opened.",
    "lab_windows_aborted": "The run stopped at the error, so its race windows were not counted.",
    "lab_differ": "Requests that differ from the normal loop",
    "col_first_diff": "first differing output token",
    "lab_double_free": "Double free caught by the allocator",
    "lab_after_stop": "Tokens after a stop token, in requests",
    "lab_leak": "Leak after the run",
    "lab_where": "{device} · model {model} · seed {seed}",
    "lab_what_page": "KV page",
    "lab_what_slot": "request slot",
    "lab_held_by_other": "held by another request",
    "lab_already_free": "already free",
    "lab_double_free_detail": "{what} {item} freed by request {request}, but it was {state}",
    "lab_leak_detail": "{pages} pages and {slots} request slots still held",
    "lab_note_cuda": "This race needs two CUDA streams: on the CPU backend the device process "
                     "executes commands in order, like a single stream, so it cannot happen there.",
    "lab_note_not_shown": "No fault this time: the race window did not open in this run (timing "
                          "dependent). Run it again, or try another seed.",
}

ZH: dict[str, str] = {
    "ctl_loops": "要对比的调度循环",
    "loop_normal": "普通（串行）",
    "loop_overlap": "重叠（一步）",
    "loop_multistep": "多步重叠（k 步）",
    "ctl_k": "k（多步）：每次调度迭代的前向次数",
    "ctl_stop_early": "请求提前停止：用一次快速探测运行为每个请求选一个停止 token（显示滞后的代价）",
    "preset_help": "**预设**。一步重叠最多能藏住与一次前向一样长的 CPU 工作（默认设置）；只有当调度器的工作"
                   "比前向还长时，多步重叠才有收益。",
    "preset_overlap": "普通与重叠（默认设置）",
    "preset_sized_run": "*你上次运行（它每步有 {run_extra} µs 额外 CPU "
                    "工作，这里已扣除）在 {device} 上（{model}，B = {batch}，{graphs}）的串行循环实测："
                    "一个解码步的前向用了 {fwd:.2f} ms，调度器自身的工作用了 {cpu:.2f} ms。每步加 {extra} µs "
                    "额外 CPU 工作后，"
                    "CPU 的部分约为 {forwards:.1f} 次前向那么长。一步重叠最多能藏住约 {hides} µs 的额外工作"
                    "（CPU 的部分等于一次前向）；再多，多步重叠的 k 至少要等于 CPU 部分折合的前向数：这个设置"
                    "需要 k = {k}，k = 4 最多能藏住约 {k4} µs。*",
    "sizing_lead_hides": "*你上次运行中一次前向用时 {fwd:.2f} ms；加上这么多额外 CPU 工作，调度器在一步"
                         "里的部分约为 {forwards:.1f} 次前向那么长，所以重叠循环能把它藏在前向下面"
                         "（这次运行自己的各项见它的公式折叠栏）。*",
    "sizing_lead_multistep": "*你上次运行中一次前向用时 {fwd:.2f} ms；加上这么多额外 CPU 工作，调度器在一步"
                             "里的部分约为 {forwards:.1f} 次前向那么长：重叠循环藏不住；k = {k} 的多步"
                             "重叠可以（这次运行自己的各项见它的公式折叠栏）。*",
    "sizing_plain_hides": "*加上这么多额外 CPU 工作，调度器在一步里的部分比这台机器上的一次前向短，所以重叠"
                          "循环能把它藏在前向下面。你自己运行之后，这里显示它的实测数字。*",
    "sizing_plain_multistep": "*加上这么多额外 CPU 工作，调度器在一步里的部分比这台机器上的一次前向长："
                              "重叠循环藏不住；k = {k} 的多步重叠可以。你自己运行之后，这里显示它的"
                              "实测数字。*",
    "sizing_how": "这是怎么设定的",
    "preset_cpu_default": "*CPU 模式：每步额外 CPU 工作 {extra} µs，即本项目双核机器上实测的第一次点击"
                          "（预热还没有测过这台机器）。*",
    "preset_unmeasured": "*还没有测过这块 GPU（没有运行预热）：已打开 CUDA Graph；要看到效果，请把额外 CPU "
                         "工作设得比一次前向略短。*",
    "preset_fixed": "*每步额外 CPU 工作 {extra} µs，取自本项目的双核机器上的测量（这台机器还没有测过："
                    "预热仍在进行）。*",
    "preset_multistep": "重调度器：多步，k = 4",
    "multistep_no_gain": "这里 T_sched + T_post（{cpu:.2f} ms）不比 T_fwd（{fwd:.2f} ms）长：一步重叠已经"
                         "藏住了 CPU 的工作，所以每次调度 k 步只会带来它的滞后（下方浪费的 token）。多步重叠"
                         "是为比前向还重的调度器准备的：试试预设“重调度器”。",
    "status_probe": "探测中：一次快速贪心运行为每个请求选出停止 token…",
    "error_no_loop": "没有可运行的循环：请至少选择一种调度循环。",
    "m_wasted_tokens": "浪费的 token（停止后多跑的前向）",
    "col_wasted": "停止后多跑的步数（{label}）",
    "formula_multistep": "多步一步 ≈ max(T_fwd, (T_sched + T_post) / k) = max({fwd:.2f}, "
                         "{cpu:.2f} / {k}) = {best:.2f} ms",
    "formula_multistep_pred": "{label}相对串行的预测加速比：{pred:.2f}×",
    "cost_title": "滞后的代价（实测）",
    "cost_wasted": "浪费的 token",
    "cost_share": "占其 {total} 个输出 token 的 {share:.1f}%",
    "cost_ttft": "首 token 延迟",
    "fold_steps": "逐步回放",
    "fold_run_more": "KV 内存与生成的文本",
    "tab_lab": "隐患实验室",
    "replay_help": (
        "**逐步回放一次运行**，一次一个解码步（现场运行、录制的 GPU 运行或导入的记录均可）。"
        "粗边框标出第 *n* 步的各段：engine stream 上的 **forward(Bn)**、它所等待的**元数据上传**"
        "（`wait_stream`）、**结果回传**以及 CPU **等待 copy_done**，还有同时进行的 CPU 工作。"
        "箭头把它们连起来；把鼠标停在任一粗边框条上可看到与它相关的各段。★ 标出仍带着一个已停止"
        "请求的前向（滞后一轮：它的 token 被丢弃）。"),
    "replay_empty": "请先显示一次运行（现场、录制或导入），然后在这里逐步回放。",
    "replay_no_step": "这次运行没有第 {step} 步：它的步号从 {first} 到 {last}。",
    "replay_need_step": "步号框是空的：请输入 {first} 到 {last} 之间的步号。",
    "ctl_replay_run": "要回放的运行",
    "ctl_step": "第 n 步",
    "ctl_prev": "◀ 上一步",
    "ctl_next": "下一步 ▶",
    "unrolled_help": (
        "**文中“展开三轮”的图，取自本次运行**。*填充*：第一次前向没有可隐藏的工作，CPU 也没有"
        "更早的批次要处理。*稳态*：每个 process_last(B*n−1*) 都位于 forward(B*n*) 之下；某一步 CPU 的工作"
        "（连同组下一批）若比前向长，GPU 仍会空闲这段差值（红色）。"
        "*排空*：最后一批被处理时，已没有前向可以把它藏起来。各面板的时间刻度各自独立。"),
    "unrolled_fill": "填充：第 {a}–{b} 步",
    "unrolled_steady": "稳态：第 {a}–{b} 步",
    "unrolled_drain": "排空：第 {a}–{b} 步",
    "cap_overlap": (
        "**第 {n} 步**（{loop}）：GPU 执行 forward(B{n})（{fwd:.2f} ms），同时 CPU 处理 B{prev}"
        "（{proc:.2f} ms）：在 copy_done 之后读取 B{prev} 的 token、判停、回收已结束的请求{then}。"
        "{waited}；CPU 有 {hidden:.2f} ms 的工作藏在它下面。"),
    "cap_then": "；接着组好并提交 B{m}（{next:.2f} ms）",
    "cap_extra": "process_last(B{m}) 的 {proc:.2f} ms 中，有 {extra:.2f} ms 是这次运行设定的额外 CPU 工作"
                 "（*额外 CPU 工作*控件，命令行上的 `--extra-cpu-us`），代替一个更重的调度器。",
    "cap_overlap_missed": (
        "**第 {n} 步**（{loop}）：循环先提交了 forward(B{n})（{fwd:.2f} ms），再处理 B{prev}"
        "（{proc:.2f} ms），这正是重叠的做法；但这一次两者在时间上几乎没有重叠：只有 {hidden:.2f} ms "
        "的工作在前向之下运行。设备开始或结束前向的时间避开了 CPU 的工作（在繁忙的机器上，进程可能"
        "要等待核心）。"),
    "cap_fill": (
        "**第 {n} 步**（{loop}，填充）：GPU 执行 forward(B{n})（{fwd:.2f} ms）；此时还没有更早的"
        "批次需要处理，CPU 直接去组好并提交下一批，之后就只能等 B{n} 的 token 回来。{waited}。"),
    "waited_first": "forward(B{n}) 等待了自己的元数据上传（wait_stream）",
    "waited_copy": "forward(B{n}) 等待了 B{n} 的元数据上传，这是 scheduler stream 上唯一的工作"
                   "（结果回传在 copy stream 上，与前向并行）；并按 stream 顺序等待 forward(B{prev})，"
                   "它把输入 token 写进了 token pool",
    "waited_engine": "forward(B{n}) 等待了 B{n} 的元数据上传，这是 scheduler stream 上唯一的工作；"
                     "并按 stream 顺序等待 forward(B{prev}) 及其结果回传（在 engine stream 上紧跟"
                     "采样执行）",
    "waited_scheduler": "forward(B{n}) 等待了 scheduler stream 上排在它之前的全部工作（wait_stream）："
                        "copy(B{prev})（它本身要等 forward(B{prev})），然后是 B{n} 的上传",
    "waited_in_order": "设备进程按顺序执行命令，就像只有一条 stream：forward(B{n}) 在 copy(B{prev}) 和 "
                       "B{n} 的上传之后开始",
    "cap_normal": (
        "**第 {n} 步**（普通循环）：GPU 执行 forward(B{n})（{fwd:.2f} ms）；随后 CPU 等待 "
        "copy_done，处理 B{n}（{proc:.2f} ms：读 token、判停、回收已结束请求），再调度下一批。"
        "没有任何东西遮住这些工作：下一次前向之前 GPU 空闲 {idle:.2f} ms。"),
    "cap_multistep": (
        "**第 {n} 步**（多步，k={k}）：forward(B{n})（{fwd:.2f} ms）的输入 token 取自 token_pool，"
        "由前一次前向写入；每次调度迭代最多提交 {k} 次前向，因此判停最多晚 {k} 步。"),
    "cap_multistep_under": "在它下面 CPU 处理 {batches}（隐藏了 {hidden:.2f} ms）。",
    "cap_multistep_none": "在它下面 CPU 没有处理任何批次：它在提交前向或等待。",
    "cap_drain": "这是最后一次前向（排空）：之后没有前向能遮住 CPU 的工作。",
    "cap_copy": "B{n} 的 token 通过 copy(B{n}) 回传；CPU 在它的 copy_done 上阻塞了 {wait:.2f} ms。",
    "cap_lag": "★ **滞后**：{items}已经停止，却仍随 B{n} 多跑了一步；它们在这次前向中的 token "
               "被丢弃。",
    "cap_lag_one": "★ **滞后**：{items}已经停止，却仍随 B{n} 多跑了一步；它在这次前向中的 token "
                   "被丢弃。",
    "cap_lag_item": "请求 {req}（在第 {stop} 步停止）",
    "cap_stopped": "请求 {reqs} 在 B{n} 中产生了停止 token；CPU 要到处理 B{n} 时才看到。",
    "cap_stopped_one": "请求 {reqs} 在 B{n} 中产生了停止 token；CPU 要到处理 B{n} 时才看到。",
    "cap_none": "**第 {n} 步**：这一步在 engine stream 上没有记录到前向。",
    "role_forward": "forward(B{n})",
    "role_upload": "元数据上传(B{n})",
    "role_copy": "结果回传(B{n})",
    "role_wait": "CPU 等待 copy_done(B{n})",
    "role_process": "process_last(B{n})",
    "role_process_last": "process_last(B{n})",
    "role_receive": "receive(B{n})",
    "role_schedule": "schedule(B{n})",
    "role_launch": "launch(B{n})",
    "rel_waits_for": "等待 {other}（wait_stream）",
    "rel_guards_copy": "{other} 等待这次上传，它是 scheduler stream 上唯一的工作",
    "rel_guards_engine": "{other} 等待这次上传，它是 scheduler stream 上唯一的工作",
    "rel_guards_scheduler": "{other} 等待这次上传，以及 scheduler stream 上排在它之前的一切（上一步的"
                            "结果回传）",
    "rel_guards_in_order": "{other} 在它之后执行：设备进程按顺序执行命令",
    "rel_hides": "把 {other} 藏在自己下面",
    "rel_hidden_under": "藏在 {other} 下面执行",
    "rel_copied_by": "它采样出的 token 由 {other} 回传到主机",
    "rel_copies": "回传 {other} 采样出的 token；向 {partner} 发出 copy_done",
    "rel_waits_copy": "阻塞直到 {other} 的 copy_done",
    "rel_after": "在 {other} 之后执行，而不是在它下面：期间 GPU 空闲",
    "rel_before": "之后是 {other}；没有东西与它重叠",
    "arrow_wait_stream": "wait_stream",
    "arrow_copy_done": "copy_done",
    "arrow_tokens": "token → 主机",
    "arrow_hidden": "藏在 forward(B{n}) 下面",
    "lag_extra": "请求 {req} 在第 {stop} 步停止；这次前向是它滞后一轮多跑的一步，其 token 被丢弃",
    "lag_extra_k": "请求 {req} 在第 {stop} 步停止；这次前向是它多跑的第 {nth}/{total} 步，"
                   "其 token 被丢弃",
    "lag_stop": "请求 {req}：在这里（process_last(B{stop})）读到停止 token",
    "lag_legend": "停止后的前向（token 丢弃）",
    "lane_busy": "{lane} · 忙碌 {busy:.1f}%",
    "lane_kernels_of": "kernel：{stream}",
    "lane_kernels_stream": "kernel：第 {number} 号 stream",
    "stop_legend": "读到停止 token",
    "lab_help": """
### 隐患实验室：去掉一道保护，让检查找出坏在哪里
每个开关去掉重叠循环的一道保护。实验室为每个开关运行一份能让它的保护起作用的负载：槽位、缓冲区和各种
保护开关用 24 个请求争用 4 个请求槽（所以槽位会被复用），每个请求生成 12 个新 token；内存开关
（前缀缓存和撤回）用共享同一段系统提示的提示词，KV 池小到装不下所有请求的完整长度（前缀缓存会找到共享的
页，请求会被撤回再恢复），每个请求生成 40 个新 token。安全引擎在种子为偶数时用第一种负载，为奇数时用
第二种。每个请求在探测运行选出的 token 处停止（“已结束请求”保护的开关下，停在长度上限前一个
token）。先用**普通循环**跑出参考结果，再用打开开关的
**重叠循环**运行，然后报告检查发现的问题：哪些请求的 token 不同（从第几个输出 token 开始）、分配器
捕获的重复释放、停止之后的 token、泄漏的页或槽位、通过两个不同的 KV 页读取的位置、记账出错的前缀缓存。
竞争与时序有关；实验室注入延迟来放大竞争窗口，并在某次运行恰好没有暴露故障时如实说明。它使用*现场运行*
页选择的模型和设备，并像现场运行一样排队。
""",
    "lab_switch": "要去掉的保护",
    "lab_seed": "负载种子",
    "lab_run": "去掉这道保护后运行",
    "lab_safe": "运行安全引擎（所有保护都在）",
    "lab_guards": "**它保护什么，去掉后会出什么错**：{guards}。",
    "lab_cuda_only": "*需要两条 CUDA stream。*",
    "lab_mark_cuda": "（需要 CUDA：此处没有）",
    "lab_no_cuda_machine": "**这台机器没有 GPU，所以这个开关在这里无法运行**（在 CPU 上，设备进程按顺序"
                           "执行命令，就像只有一条 stream，这个竞争不会发生）；请选择另一个开关。它的测试"
                           "在 CUDA 上运行。",
    "lab_no_cuda_device": "**现场运行页选择的设备是 CPU**：请在那里选择“自动”或 CUDA 后再运行这个开关。",
    "lab_remapped": "通过两个不同的 KV 页读取的位置",
    "lab_remapped_item": "请求 {request}，位置 {position}",
    "lab_cache": "前缀缓存的记账出错",
    "lab_stalled": "运行无法继续",
    "lab_memory": "这次运行的内存情况：{retractions} 次撤回（页不够时把请求暂时放下），{hits} 个提示 "
                  "token 命中前缀缓存。",
    "lab_idle": "选择一道保护，然后运行实验室。",
    "lab_running": "正在 {device} 上运行实验室：先用普通循环得到参考结果，再用{what}的重叠循环…",
    "lab_all_on": "所有保护都在",
    "lab_fault": "检查发现了故障：{title}",
    "lab_safe_ok": "没有故障：所有保护都在时，每项检查都通过。",
    "lab_not_shown": "这次没有出现故障",
    "lab_needs_cuda": "此处未运行：这个开关需要 CUDA",
    "lab_windows": "这次运行中，被去掉的保护对应的竞争窗口打开了 {n} 次（为已结束或已撤回的请求送回的 "
                   "token，加上排队中的前向仍在读取其 token_pool 行时就释放的槽位）。",
    "lab_windows_safe": "这次运行中保护机制起作用了 {n} 次（丢弃滞后一轮的 token）："
                        "如果没有它们，每一次都会打开一个竞争窗口。",
    "lab_windows_aborted": "运行在出错处停止，因此没有统计竞争窗口。",
    "lab_differ": "与普通循环结果不同的请求",
    "col_first_diff": "第一个不同的输出 token",
    "lab_double_free": "分配器捕获的重复释放",
    "lab_after_stop": "停止 token 之后仍有 token 的请求",
    "lab_leak": "运行后的泄漏",
    "lab_where": "{device} · 模型 {model} · 种子 {seed}",
    "lab_what_page": "KV 页",
    "lab_what_slot": "请求槽",
    "lab_held_by_other": "被另一个请求持有",
    "lab_already_free": "已经是空闲的",
    "lab_double_free_detail": "请求 {request} 释放了{what} {item}，但它{state}",
    "lab_leak_detail": "仍有 {pages} 个页和 {slots} 个请求槽未释放",
    "lab_note_cuda": "这个竞争需要两条 CUDA stream：在 CPU 后端，设备进程按顺序执行命令，就像只有"
                     "一条 stream，所以不会发生。",
    "lab_note_not_shown": "这次没有出现故障：这次运行中竞争窗口没有打开（与时序有关）。再运行一次，"
                          "或换一个种子。",
}

# The hazard lab's switches, (title, what the safeguard guards), by language and switch name.
HAZARD_NAMES: dict[str, dict[str, tuple[str, str]]] = {
    "en": {
        "no_wait_stream": (
            "Remove engine_stream.wait_stream(scheduler_stream)",
            "metadata -> forward: the forward may read a batch's slots, positions and page table "
            "before their upload has landed"),
        "no_deferred_free": (
            "Free a finished request's slot at once",
            "the token-pool row of a finished request's slot: freed at once, the slot goes to the "
            "next request, whose prompt is written into that row on the scheduler stream while "
            "the lag-one forward, already queued, still reads the row and writes its token there "
            "(its KV pages go back at once either way: only forwards write them, in order)"),
        "single_host_buffer": (
            "One host result buffer instead of a ring",
            "the host copy of a step's tokens: with one buffer, the result copy of batch n+1 "
            "(queued after its forward) overwrites batch n's tokens before the CPU, one step "
            "behind, has read them, so the CPU appends step n+1's tokens as step n's"),
        "no_result_ring": (
            "Drop the device result ring (copy the CUDA graph's output)",
            "the sampled tokens on the GPU, before the copy stream copies them to the host: a "
            "CUDA graph writes its output to the same place at every replay, so with the copy on "
            "its own stream forward(n+1) may overwrite batch n's tokens before copy(n) has read "
            "them, and the CPU appends step n+1's tokens as step n's (the device result ring "
            "gives each step a row of its own; the host's buffers have their own switch, \"One "
            "host result buffer instead of a ring\")"),
        "no_finished_guard": (
            "Drop the finished-request guard",
            "the lag-one token of a request that already stopped (Mini-SGLang's finished_reqs "
            "only skips the second free; this guard also drops the token): "
            "without the guard it is processed as if the request still ran, appended after the "
            "stop, and the length check finishes the request again, giving its slot back twice "
            "(the allocator catches the double free)"),
        "no_cache_lock": (
            "Drop the prefix cache's locks",
            "prefix pages that a running request reads: unlocked, the cache may evict them when "
            "memory runs short and hand them to another request while the batch that reads them "
            "is still in flight"),
        "late_prefix_insert": (
            "Insert a prefill's prefix after the next batch is built",
            "one mapping of positions to KV pages per request: inserted late and the request "
            "remapped to the cache's pages (as SGLang 0.5.17 does; the open SGLang PR 38140), the "
            "next batch is built against one mapping and later steps read another, so a request "
            "reads a position through two different pages"),
        "no_retract_guard": (
            "Drop the retraction guard",
            "the token that the batch already launched computes for a request retracted meanwhile "
            "(pages ran out): without the guard it is appended, and the request resumes one token "
            "off"),
        "no_deferred_retract_free": (
            "Free a retracted request's slot at once",
            "the token-pool row of a retracted request's slot, given back while the launched "
            "batch that still carries it reads the row (here the slot can only go to a prefill "
            "built after that batch is processed, so no fault follows)"),
    },
    "zh": {
        "no_wait_stream": (
            "去掉 engine_stream.wait_stream(scheduler_stream)",
            "元数据 → 前向：前向可能在批次的槽位、位置和页表上传完成之前就读取它们"),
        "no_deferred_free": (
            "请求结束后立即释放其槽位",
            "已结束请求的槽位对应的 token_pool 行：立即释放后，槽位交给下一个请求，它的提示词在 scheduler "
            "stream 上写进这一行，而已经排队的滞后一轮的前向仍在读这一行、并把它的 token 写进去（它的 KV "
            "页无论如何都立即归还：只有前向按顺序写页）"),
        "single_host_buffer": (
            "只用一个主机结果缓冲区，而不是环形缓冲",
            "每步 token 的主机副本：只有一个缓冲区时，批次 n+1 的结果回传（排在它的前向之后）"
            "会在落后一步的 CPU 读取批次 n 的 token 之前把它们覆盖，于是 CPU 把第 n+1 步的 token "
            "当成第 n 步的追加"),
        "no_result_ring": (
            "去掉设备结果环（直接回传 CUDA Graph 的输出）",
            "copy stream 回传到主机之前、GPU 上的采样 token：CUDA Graph 每次重放都把输出写到同一个位置，"
            "所以回传在自己的 stream 上时，forward(n+1) 可能在 copy(n) 读完之前覆盖批次 n 的 token，"
            "于是 CPU 把第 n+1 步的 token 当成第 n 步的追加（设备结果环给每一步自己的一行，就不会这样；"
            "主机缓冲区另有一个开关：“只用一个主机结果缓冲区，而不是环形缓冲”）"),
        "no_finished_guard": (
            "去掉“已结束请求”保护",
            "已经停止的请求滞后一轮多出的 token（Mini-SGLang 的 finished_reqs 只跳过第二次释放；"
            "这道保护还丢掉这个 token）：没有保护时它被当作请求仍在运行"
            "来处理，追加在停止之后，长度检查再次结束该请求，把它的槽位归还两次（分配器捕获这次重复释放）"),
        "no_cache_lock": (
            "去掉前缀缓存的锁",
            "正在运行的请求所读取的前缀页：不加锁时，内存紧张的缓存可能把它们驱逐并交给另一个请求，"
            "而读取它们的批次仍在执行中"),
        "late_prefix_insert": (
            "在下一批组好之后才插入预填充的前缀",
            "每个请求从位置到 KV 页的唯一映射：插入太晚、并把请求改指向缓存中的页（SGLang 0.5.17 仍是这样；"
            "其未合并的 SGLang PR 38140）时，下一批按一种映射组好，之后的步却读另一种，"
            "于是请求通过两个不同的页读取同一个位置"),
        "no_retract_guard": (
            "去掉撤回保护",
            "已提交的批次为一个期间被撤回（页不够了）的请求算出的 token：没有保护时它被追加，请求恢复"
            "后就错了一个 token"),
        "no_deferred_retract_free": (
            "被撤回的请求立即释放其槽位",
            "被撤回请求的槽位对应的 token_pool 行，在仍带着它的已提交批次还在读这一行时就被归还（这里该槽位"
            "只能交给那个批次处理完之后才组的预填充，所以不会出故障）"),
    },
}
