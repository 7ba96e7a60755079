"""Imported traces' sentences, English and Chinese: what an import found about its loop, gaps and
terms, its step-through, headline and "What to look for" panel, and the import tab's controls
(merged by ``texts.strings``; placeholders are filled from the file only).
"""

from __future__ import annotations

EN: dict[str, str] = {
    # what the import found (``record.imported.profiler_import`` notes)
    "note_terms_from_gaps": "A trace has no scheduler phases of ours: T_fwd is the GPU's busy "
                            "time per step, and the rest of the step is the <b>GPU waiting for "
                            "the host</b> (between forwards, and in eager mode between the "
                            "launches inside one). That wait is not the host's work: the host "
                            "also works while the GPU does (launching, and in an overlapped loop "
                            "building the next batch).",
    "note_loop_serial": "<b>A serial loop</b>: in {waited} of {steps} steps the host blocked in a "
                        "synchronising call until the GPU had finished everything it was given, "
                        "then built the next step.",
    "note_loop_overlapped": "<b>An overlapped loop</b>, as its timing shows:",
    "note_loop_no_wait": "the host waited for the GPU to run dry in {waited} of {steps} steps;",
    "note_loop_late": "a median {late}% of a step's GPU work ran after the host had begun the "
                      "next step;",
    "note_loop_beside": "in {beside} of {steps} steps a second stream worked beside the main "
                        "one;",
    "note_loop_under": "{under}% of the host's named work (its launches left out) ran while the "
                       "GPU was busy;",
    "note_loop_unknown": "Serial or overlapped cannot be told from {steps} steps of this trace: "
                         "the formula reads it as a serial loop.",
    "note_joined": "Gaps between kernels shorter than {join} µs (this trace's median time from a "
                   "launch call to its kernel's start on an idle stream) count as busy: no host "
                   "could have filled them.",
    "note_joined_fixed": "Gaps between kernels shorter than {join} µs count as busy (the trace "
                         "has too few launches onto an idle stream to measure its own).",
    "note_phases": "The CPU lane shows the host's phases the trace names ({phases}), in the "
                   "colour of their role in the loop.",
    "note_profiler_cost": "<b>torch.profiler's own cost is inside this trace</b>: it recorded about "
                          "{events} host events per step, and recording each one took the host "
                          "time. The host's part of a step, and the GPU's wait for it, are longer "
                          "than without the profiler; kernel times are about right. Compare host "
                          "times only between traces taken the same way.",
    # what SGLang's own profiler annotations gave (``record.imported``: ``trace_steps``,
    # ``host_phases``)
    "note_sglang_steps": "<b>The steps and phases are SGLang's own annotations.</b> Its profiler "
                         "marks each forward as <code>step[MODE bs=N]</code> (N: the batch's real "
                         "size); this trace has {steps}: {modes}. A step begins where SGLang's "
                         "loop began the iteration that launched it.",
    "note_sglang_phases": "The CPU lane shows SGLang's annotations of its scheduler ({phases}), "
                          "each in the colour of its role in the loop; inside "
                          "<code>scheduler.run_batch</code>, its mark of the forward it launches; "
                          "inside <code>scheduler.process_batch_result</code>, the host's wait for "
                          "the GPU ({waits}), drawn as wait. A result's processing belongs to the "
                          "step whose result it is.",
    "note_sglang_overlap": "SGLang marks its <b>overlap loop</b> here: each result is copied to the "
                           "host on a copy stream of its own (<code>copy_result_to_cpu</code>), and "
                           "<code>scheduler.process_batch_result</code> processes step n−1's result "
                           "after step n was launched.",
    "note_steps_prefill": "The GPU work launched before the first of them, a forward's worth, is "
                          "step 1: the prefill, whose kernels (and launches) differ from a decode "
                          "step's, so nothing marks it as the others are marked.",
    # the formula, per imported run
    "trace_head": "<b>{label}</b>, terms per step over the middle 80% of its steps:",
    "trace_terms": "step {step:.2f} ms = GPU busy (T_fwd) {fwd:.2f} ms + GPU waiting for the "
                   "host {wait:.2f} ms",
    "trace_pred": "read as a serial loop whose wait is the host's part: overlapped step ≈ "
                  "max({fwd:.2f}, {wait:.2f}) = {best:.2f} ms, <b>{pred:.2f}× predicted</b>",
    "trace_no_pred": "<b>overlapped already: no overlap is predicted</b> for it, its step "
                     "costs about the longer of its two parts already (its GPU waits {wait:.2f} "
                     "ms a step)",
    "trace_measured": "measured per step ({a} step time ÷ {b} step time, the middle 80% of "
                      "each run's steps): {meas:.2f}×",
    "trace_found": "How this trace was read",
    "tag_overlapped": " · overlapped loop",
    "tag_serial": " · serial loop",
    "m_gpu_wait_us": "GPU waiting for the host, per step (ms)",
    "tag_unknown": " · loop not told (read as serial)",
    # a measured speedup far from an imported trace's prediction (``viz.formula``)
    "why_trace_forward": "the GPU's busy time (T_fwd) was {ms_b:.2f} ms a step in the {b} run "
                         "against {ms_a:.2f} ms in the {a} run",
    "why_trace_wait": "the GPU still waited {ms_b:.2f} ms a step for the host in the {b} run, "
                      "where the prediction leaves {ms_left:.2f} ms (the host's part that the "
                      "forward cannot cover)",
    "why_trace_events": "the profiler recorded {ev_b} host events a step in the {b} run against "
                        "{ev_a} in the {a} run, and recording each one took the host time",
    # an import's headline (``viz.headline``)
    "headline_trace_serial": "<b>{name}: a serial loop, GPU busy {busy:.0f}% of its steady "
                             "steps</b>: of each {step:.2f} ms step the GPU waited {wait:.2f} ms "
                             "for the host; overlapping the host's part with the forward would "
                             "make a step about {pred:.2f}× faster.",
    "headline_trace_overlapped": "<b>{name}: an overlapped loop, GPU busy {busy:.0f}% of its "
                                 "steady steps</b>: the host built the next step while the GPU ran "
                                 "this one; of each {step:.2f} ms step the GPU still waited "
                                 "{wait:.2f} ms for the host.",
    "headline_trace_unknown": "<b>{name}: GPU busy {busy:.0f}% of its steady steps</b>: of each "
                              "{step:.2f} ms step the GPU waited {wait:.2f} ms for the host; its "
                              "timing does not tell a serial loop from an overlapped one.",
    "headline_traces_faster": "<b>GPU busy {busy_a:.0f}% → {busy_b:.0f}%, {name_b} {speedup:.2f}× "
                              "faster per step than {name_a}</b>: its GPU waited {wait_b:.2f} ms "
                              "a step for the host, against {wait_a:.2f} ms.",
    "headline_traces_not_faster": "<b>GPU busy {busy_a:.0f}% → {busy_b:.0f}%, but {name_b} was "
                                  "not faster per step than {name_a} ({speedup:.2f}×)</b>: the "
                                  "formula below says what the traces measured.",
    # the "What to look for" panel beside an import (``viz.headline.look_for_key``)
    "timeline_help_import": """
### What to look for
- **Lanes.** Each CUDA stream of the trace is a lane (`GPU 0 stream 7`); each host thread that
  launched GPU work is a CPU lane. Where the trace names the scheduler's phases (SGLang's
  annotations, Mini-SGLang's or vLLM's functions) they take their roles' colours: `receive`,
  `schedule`, `launch`, `wait`, `process_last`; otherwise the CPU lane shows the thread's
  outermost ops and runtime calls.
- **Red hatched bands = GPU idle**: holes in the union of all the GPU lanes; gaps shorter than
  a launch (this trace's own launch latency) count as busy.
- **A serial loop:** a band after every forward: the host blocks until the GPU has finished (a
  synchronising call, a copy into pageable memory), then builds the next step.
- **An overlapped loop:** the host launches step *n+1* while step *n* runs: step *n−1*'s
  processing sits under the forward, a second stream's work beside it.
- **The profiler's own cost** is inside the trace: the host's times are longer than without
  it; the kernels' are about right.

The formula below says how the trace was read (its steps, its loop) and what a trace cannot
tell (tokens, latencies).
""",
    # the step-through of an imported run
    "cap_trace": "**Step {n}**: the GPU was busy {busy:.2f} ms of the step's {step:.2f} ms "
                 "({items} kernels and copies); it waited {wait:.2f} ms for the host.",
    "cap_trace_late": " {late:.2f} ms of this step's GPU work ran after the host had begun step "
                      "{m}: the host built the next step while this one ran (overlap).",
    "cap_trace_host": " On the host: {phases}.",
    "cap_trace_none": "**Step {n}**: no GPU work was launched in this step.",
    "trace_step_box": "step {n}'s GPU work",
    "trace_late_band": "after the host began step {m}",
    # the import tab
    "ctl_upload": "Trace or run record (one file, or two to compare)",
    "ctl_beside": "Keep what is on screen and add these beside it",
    "upload_help": (
        "Upload a `torch.profiler` trace (`.json` or `.json.gz`, for example from SGLang, vLLM or "
        "Mini-SGLang) or a run record saved from this page. **Choose two files** to see them "
        "side by side on one time axis, with the step window and the metrics' ratios; tick the "
        "box below to add a file beside what is on screen (a live run, a recorded run or an "
        "earlier import). GPU streams become lanes; idle gaps are the holes in the union of all "
        "GPU lanes."),
    "status_imported_two": "Side by side: {names}",
    "status_beside": "Beside the runs on screen: {names}",
    "status_dropped": "At most {most} runs are drawn at once: the oldest were left out.",
}

ZH: dict[str, str] = {
    "note_terms_from_gaps": "trace 中没有我们的调度阶段：T_fwd 是每步 GPU 的忙碌时间，每步剩下的时间是"
                            "<b>GPU 等待主机的时间</b>（在前向之间；eager 模式下还有同一前向内"
                            "各次启动之间）。这段等待不是主机的工作：GPU 工作时主机也在工作"
                            "（提交前向；在重叠循环中还在构建下一批）。",
    "note_loop_serial": "<b>串行循环</b>：{steps} 步中有 {waited} 步，主机在一个同步调用里一直阻塞到 GPU "
                        "做完交给它的全部工作，然后才构建下一步。",
    "note_loop_overlapped": "<b>重叠循环</b>，从它的时序可以看出：",
    "note_loop_no_wait": "{steps} 步中只有 {waited} 步主机等到了 GPU 空下来；",
    "note_loop_late": "每步 GPU 工作中位数有 {late}% 是在主机开始下一步之后才运行的；",
    "note_loop_beside": "{steps} 步中有 {beside} 步另一条 stream 在主 stream 旁边工作；",
    "note_loop_under": "主机有名字的工作（不算提交）中有 {under}% 是在 GPU 忙碌时进行的；",
    "note_loop_unknown": "从这个 trace 的 {steps} 步看不出是串行还是重叠：公式把它当作串行循环。",
    "note_joined": "短于 {join} µs 的 kernel 间空隙（本 trace 中，从启动调用到 kernel 在空闲 stream 上开始"
                   "运行的时间中位数）算作忙碌：没有主机能填上这样的空隙。",
    "note_joined_fixed": "短于 {join} µs 的 kernel 间空隙算作忙碌（trace 中在空闲 stream 上的启动太少，"
                         "测不出它自己的启动时间）。",
    "note_phases": "CPU 泳道显示 trace 中有名字的主机阶段（{phases}），按它们在循环中的角色着色。",
    "note_profiler_cost": "<b>torch.profiler 自身的开销就在这个 trace 里</b>：它每步记录了约 {events} "
                          "个主机事件，每记录一个都要占用主机时间。所以每步中主机的部分、以及 GPU 等待它的"
                          "时间，都比不开 profiler 时长；kernel 的时间大致准确。只在用同样方式录制的 trace "
                          "之间比较主机时间。",
    "note_sglang_steps": "<b>这些步和阶段都是 SGLang 自己的标注。</b>它的 profiler 把每次前向标记为 "
                         "<code>step[MODE bs=N]</code>（N 是批的实际大小）；这个 trace 中有 {steps} 个："
                         "{modes}。一步从 SGLang 的循环开始发起它的那一轮迭代时算起。",
    "note_sglang_phases": "CPU 泳道显示 SGLang 对其调度器的标注（{phases}），按它们在循环中的角色着色；"
                          "<code>scheduler.run_batch</code> 之内是它所发起的那次前向的标记；"
                          "<code>scheduler.process_batch_result</code> 之内，主机等待 GPU 的时间"
                          "（{waits}）画作 wait。处理某个结果的阶段归入该结果所属的那一步。",
    "note_sglang_overlap": "这里 SGLang 标出了它的<b>重叠循环</b>：每个结果在单独的拷贝 stream 上拷回主机"
                           "（<code>copy_result_to_cpu</code>），<code>scheduler.process_batch_result</code> "
                           "在第 n 步发起之后才处理第 n−1 步的结果。",
    "note_steps_prefill": "在第一个标记之前发起的 GPU 工作相当于一次前向，算作第 1 步：这是预填充，"
                          "它的 kernel（以及启动方式）与解码步不同，所以没有像其他步那样被标记。",
    "trace_head": "<b>{label}</b>，取其中间 80% 的步，每步各项：",
    "trace_terms": "每步 {step:.2f} ms = GPU 忙碌（T_fwd）{fwd:.2f} ms + GPU 等待主机 "
                   "{wait:.2f} ms",
    "trace_pred": "当作串行循环、把等待看作主机的部分：重叠一步 ≈ max({fwd:.2f}, {wait:.2f}) = "
                  "{best:.2f} ms，<b>预测 {pred:.2f}×</b>",
    "trace_no_pred": "<b>已经是重叠循环：不对它预测重叠</b>，它的每步时间已经约等于两部分中较长的那一部分"
                     "（它的 GPU 每步等待 {wait:.2f} ms）",
    "trace_measured": "每步实测（{a}每步时间 ÷ {b}每步时间，各取中间 80% 的步）：{meas:.2f}×",
    "trace_found": "这个 trace 是怎样读的",
    "tag_overlapped": " · 重叠循环",
    "tag_serial": " · 串行循环",
    "m_gpu_wait_us": "每步 GPU 等待主机的时间（ms）",
    "tag_unknown": " · 看不出是哪种循环（按串行读）",
    "why_trace_forward": "{b}运行中 GPU 每步忙碌（T_fwd）{ms_b:.2f} ms，而{a}运行中是 {ms_a:.2f} ms",
    "why_trace_wait": "{b}运行中 GPU 每步仍要等待主机 {ms_b:.2f} ms，而预测只留下 {ms_left:.2f} ms"
                      "（主机那部分中前向盖不住的时间）",
    "why_trace_events": "profiler 在{b}运行中每步记录了 {ev_b} 个主机事件，在{a}运行中是 {ev_a} 个，"
                        "记录每一个都要占用主机时间",
    "headline_trace_serial": "<b>{name}：串行循环，稳定阶段 GPU 忙碌 {busy:.0f}%</b>：每步 {step:.2f} ms "
                             "中 GPU 等待主机 {wait:.2f} ms；若让主机的部分与前向重叠，每步约可快 "
                             "{pred:.2f}×。",
    "headline_trace_overlapped": "<b>{name}：重叠循环，稳定阶段 GPU 忙碌 {busy:.0f}%</b>：GPU 运行这一步时，"
                                 "主机已在构建下一步；每步 {step:.2f} ms 中 GPU 仍等待主机 {wait:.2f} ms。",
    "headline_trace_unknown": "<b>{name}：稳定阶段 GPU 忙碌 {busy:.0f}%</b>：每步 {step:.2f} ms 中 GPU "
                              "等待主机 {wait:.2f} ms；从它的时序看不出是串行循环还是重叠循环。",
    "headline_traces_faster": "<b>GPU 忙碌 {busy_a:.0f}% → {busy_b:.0f}%，{name_b}每步比{name_a}快 "
                              "{speedup:.2f}×</b>：它的 GPU 每步等待主机 {wait_b:.2f} ms，而后者是 "
                              "{wait_a:.2f} ms。",
    "headline_traces_not_faster": "<b>GPU 忙碌 {busy_a:.0f}% → {busy_b:.0f}%，但{name_b}每步并不比"
                                  "{name_a}快（{speedup:.2f}×）</b>：下面的公式说明了这些 trace 测到了什么。",
    "timeline_help_import": """
### 看什么
- **泳道。** trace 中的每条 CUDA stream 是一条泳道（`GPU 0 stream 7`）；每个提交了 GPU 工作的主机线程是一条
  CPU 泳道。trace 中有调度器阶段的名字时（SGLang 的标注、Mini-SGLang 或 vLLM 的函数），它们按角色着色：
  `receive`、`schedule`、`launch`、`wait`、`process_last`；否则 CPU 泳道显示该线程最外层的算子和运行时调用。
- **红色斜线带 = GPU 空闲**：所有 GPU 泳道并集中的空洞；短于一次启动（本 trace 自己的启动延迟）的
  间隙算作忙碌。
- **串行循环：** 每次前向之后都有一条红带：主机一直阻塞到 GPU 做完（一个同步调用、一次拷到可分页内存的拷贝），
  然后才构建下一步。
- **重叠循环：** 第 *n* 步运行时主机就发起第 *n+1* 步：第 *n−1* 步的处理落在前向之下，另一条 stream 的工作
  在它旁边。
- **profiler 自身的开销**就在 trace 里：主机的时间比不开 profiler 时长；kernel 的时间大致准确。

下面的公式说明这个 trace 是怎样读的（它的步、它的循环），以及 trace 说不出的东西（token、延迟）。
""",
    "cap_trace": "**第 {n} 步**：这一步 {step:.2f} ms 中 GPU 忙碌 {busy:.2f} ms（{items} 个 kernel 和拷贝）；"
                 "它等待主机 {wait:.2f} ms。",
    "cap_trace_late": "这一步的 GPU 工作中有 {late:.2f} ms 是在主机开始第 {m} 步之后运行的：这一步运行时，"
                      "主机已在构建下一步（重叠）。",
    "cap_trace_host": "主机上：{phases}。",
    "cap_trace_none": "**第 {n} 步**：这一步没有提交 GPU 工作。",
    "trace_step_box": "第 {n} 步的 GPU 工作",
    "trace_late_band": "主机开始第 {m} 步之后",
    "ctl_upload": "trace 或运行记录（一个文件，或选两个来比较）",
    "ctl_beside": "保留屏幕上的内容，把这些加在旁边",
    "upload_help": (
        "上传 `torch.profiler` trace（`.json` 或 `.json.gz`，例如来自 SGLang、vLLM 或 Mini-SGLang），"
        "或本页下载的运行记录。**选两个文件**，就能在同一时间轴上并排查看，带步窗口和指标的比值；勾选下面的"
        "方框，可以把文件加在屏幕上已有内容（现场运行、录制的运行或之前的导入）的旁边。GPU stream 成为泳道；"
        "空闲间隙是所有 GPU 泳道并集中的空洞。"),
    "status_imported_two": "并排：{names}",
    "status_beside": "加在屏幕上的运行旁边：{names}",
    "status_dropped": "一次最多画 {most} 次运行：最早的几次没有画出。",
}
