"""Imported traces' sentences, English and Chinese: what an import found about its loop and its
gaps, the formula's terms named by what a trace holds, the step-through of imported steps, the
profiler's own cost, and the import tab's controls.

``texts.strings`` merges these into its tables. Placeholders are filled with measured numbers
and names from the file only.
"""

from __future__ import annotations

EN: dict[str, str] = {
    # what the import found (``record.profiler_import`` notes)
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
