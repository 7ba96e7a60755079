"""The run's one-line summary (the headline), the busy-machine badge, and the page's folds: what
a reader sees first after a run, and the titles of what is one click away; and the line for the
engine: where a waiting run stands, and the recording shown meanwhile."""

from __future__ import annotations

EN: dict[str, str] = {
    # the headline: one line after every run
    "gpu_cuda": "GPU",
    "gpu_cpu-process": "GPU (here the device process playing it)",
    "gpu_cpu-inline": "GPU (here played in the scheduler's own process)",
    "headline_faster": "<b>{gpu} idle {idle_a} → {idle_b} ms, {name} {speedup:.2f}× faster per "
                       "decode step</b>: the CPU's work now runs under the GPU's forward.",
    "headline_faster_partly": "<b>{gpu} idle {idle_a} → {idle_b} ms, {name} {speedup:.2f}× faster "
                              "per decode step</b>, but the GPU still waited: the busiest loop "
                              "kept it busy {busy:.0f}% of the time; the formula below says where "
                              "the rest went.",
    "headline_not_faster": "<b>{gpu} idle {idle_a} → {idle_b} ms, but {name} was not faster per "
                           "decode step ({speedup:.2f}×)</b>: the formula below says what the "
                           "runs measured.",
    "headline_busy": "<b>Not a fair comparison: {why}.</b> Your runs measured {gpu} idle "
                     "{idle_a} → {idle_b} ms and {name} {speedup:.2f}× per decode step, but "
                     "their times measure the machine, not the loops: run again when it is "
                     "quieter (a browser drawing this page on the same machine counts as "
                     "another program; the page's own server does not).",
    "headline_quiet": "The same work on a quiet machine (a recording, drawn under your runs): ",
    "headline_single": "<b>{gpu} idle {idle_a} ms in {gaps}</b> ({name} alone: choose normal and "
                       "overlap to compare them).",
    "headline_also": "; {name} {speedup:.2f}×",
    "headline_no_steady": "<b>{gpu} idle {idle_a} → {idle_b} ms</b> ({name}); the runs are too "
                          "short for a per-step comparison.",
    "busy_other": "other programs used {share:.0f}% of this machine's {cpus} cores",
    "busy_device": "the device process had its core only {share:.0f}% of its working time",
    "busy_badge": "⚠ busy machine: {why}",
    # folds: one click away
    "fold_formula": "Why: the article's formula with these runs' numbers",
    "fold_all_metrics": "All metrics ({n} more rows)",
    "fold_placement": "Where the processes ran",
    "fold_more_settings": "More settings: model, batch, prompts, multi-step k, KV memory, arrivals",
    "fold_metrics_help": "How to read the numbers",
    "presets_label": "**Presets:**",
    "status_queued": "Joining the line for the engine: it does one thing at a time (a "
                     "visitor's run, a lab run, or its warm-up after the app starts).",
    # the line for the engine (ui.turns, ui.waiting): where a waiting run stands
    "line_place": "You are <b>{nth}</b> in line; about <b>{seconds} s</b>.",
    "line_why": "The engine does one thing at a time (a visitor's run, a lab run, or its "
                "warm-up), so runs take turns; Stop takes yours out of the line and nobody "
                "else's.",
    "line_recording": "Meanwhile the chart shows the same work recorded on a quiet machine: a "
                      "recording, not your run. Yours replaces it when its turn comes.",
    "line_later": "Your run's timelines are drawn below when its turn comes.",
    "recording_note": "Recording, not your run: the same work on a quiet machine ({where})",
    "timeline_queued": "Your run is in line: its timelines are drawn here when its turn comes.",
    "zoom_queued": "Your run is in line: the step window is drawn when it has finished.",
    "fail_left_line": "Stopped: your run left the line before its turn, so nothing ran. Press "
                      "Run to join the line again.",
    "timeline_left_line": "Your run left the line before its turn: nothing ran to draw.",
    "line_full": "The line for the engine is full: {most} runs are waiting already. Press Run "
                 "again in a minute.",
    "lab_in_line": "Waiting for the engine: you are {nth} in line; about {seconds} s.",
    "lab_loading": "Loading the engine for the lab…",
    # the whole-run timeline: each run's GPU time added up, under its lanes
    "sum_row": "GPU time, added up",
    "sum_idle": "idle {ms} ms",
    "sum_busy": "busy {ms} ms",
    "sum_both": "◂ {idle} · {busy}",
    "sum_beside": "◂ {idle}",
    "sum_idle_name": "GPU idle, added up",
    "sum_busy_name": "GPU busy, added up",
    "hover_sum_idle": "<b>GPU idle, added up: {ms} ms</b> ({share}% of the GPU's time)<br>"
                      "every red band above, laid end to end from 0",
    "hover_sum_busy": "<b>GPU busy, added up: {ms} ms</b> ({share}% of the GPU's time)<br>"
                      "time some GPU lane was working",
    # a whole run of a few hundred steps: its idle share column by column
    "idle_row": "GPU idle over time",
    "hover_idle_column": "<b>GPU idle {share}% of the time</b><br>{a}–{b} ms",
}

ZH: dict[str, str] = {
    "gpu_cuda": "GPU",
    "gpu_cpu-process": "GPU（此处由设备进程扮演）",
    "gpu_cpu-inline": "GPU（此处在调度器自己的进程里扮演）",
    "headline_faster": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms，{name}每个解码步快 {speedup:.2f}×</b>："
                       "CPU 的工作现在在 GPU 前向的同时进行。",
    "headline_faster_partly": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms，{name}每个解码步快 {speedup:.2f}×"
                              "</b>，但 GPU 仍在等待：最忙的循环也只让它忙了 {busy:.0f}% 的时间；"
                              "下面的公式说明其余时间去了哪里。",
    "headline_not_faster": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms，但{name}每个解码步并没有更快"
                           "（{speedup:.2f}×）</b>：下面的公式说明了这几次运行测到了什么。",
    "headline_busy": "<b>这次比较不可信：{why}。</b>你的运行测得 {gpu} 空闲 {idle_a} → {idle_b} ms，"
                     "{name}每个解码步 {speedup:.2f}×，但这些时间反映的是机器有多忙，而不是循环本身：请在"
                     "机器空闲一些时再运行（在同一台机器上绘制本页的浏览器也算其他程序；本页自己的服务器"
                     "不算）。",
    "headline_quiet": "同一负载在空闲机器上（一段录制，画在你的运行下方）：",
    "headline_single": "<b>{gpu} 空闲 {idle_a} ms，共 {gaps}</b>（只运行了{name}：同时选择普通和重叠"
                       "才能比较）。",
    "headline_also": "；{name} {speedup:.2f}×",
    "headline_no_steady": "<b>{gpu} 空闲 {idle_a} → {idle_b} ms</b>（{name}）；运行太短，无法逐步比较。",
    "busy_other": "其他程序占用了这台机器 {cpus} 个核心的 {share:.0f}%",
    "busy_device": "设备进程在它工作的时间里只有 {share:.0f}% 拿到了自己的核心",
    "busy_badge": "⚠ 机器繁忙：{why}",
    "fold_formula": "为什么：代入这几次运行数值的文中公式",
    "fold_all_metrics": "全部指标（另有 {n} 行）",
    "fold_placement": "各进程运行在哪里",
    "fold_more_settings": "更多设置：模型、批大小、提示、多步 k、KV 内存、请求到达",
    "fold_metrics_help": "如何读这些数字",
    "presets_label": "**预设：**",
    "status_queued": "正在加入引擎的队列：它一次只做一件事（一位访客的运行、一次实验室运行，"
                     "或应用启动后的预热）。",
    "line_place": "你排在第 <b>{n}</b> 位；大约 <b>{seconds} 秒</b>。",
    "line_why": "引擎一次只做一件事（一位访客的运行、一次实验室运行或预热），所以运行要轮流进行；"
                "“停止”只让你自己的运行离开队列，不影响别人。",
    "line_recording": "在此期间，图中是同一负载在空闲机器上的录制：这是录制，不是你的运行。"
                      "轮到你时，你的运行会取代它。",
    "line_later": "轮到你的运行时，它的时间线会画在下面。",
    "recording_note": "录制，不是你的运行：同一负载在空闲机器上（{where}）",
    "timeline_queued": "你的运行正在排队：轮到它时，它的时间线会画在这里。",
    "zoom_queued": "你的运行正在排队：运行结束后绘制步窗口。",
    "fail_left_line": "已停止：你的运行在轮到它之前离开了队列，什么都没有运行。点击“运行”重新排队。",
    "timeline_left_line": "你的运行在轮到它之前离开了队列：没有运行过的内容可画。",
    "line_full": "引擎的队列已满：已有 {most} 个运行在等待。请过一分钟再点击“运行”。",
    "lab_in_line": "等待引擎：你排在第 {n} 位；大约 {seconds} 秒。",
    "lab_loading": "正在为实验室加载引擎…",
    "sum_row": "GPU 时间合计",
    "sum_idle": "空闲 {ms} ms",
    "sum_busy": "忙碌 {ms} ms",
    "sum_both": "◂ {idle} · {busy}",
    "sum_beside": "◂ {idle}",
    "sum_idle_name": "GPU 空闲合计",
    "sum_busy_name": "GPU 忙碌合计",
    "hover_sum_idle": "<b>GPU 空闲合计：{ms} ms</b>（占 GPU 时间的 {share}%）<br>"
                      "上方所有红色带首尾相接，从 0 开始排开",
    "hover_sum_busy": "<b>GPU 忙碌合计：{ms} ms</b>（占 GPU 时间的 {share}%）<br>"
                      "至少一条 GPU 泳道在工作的时间",
    "idle_row": "GPU 空闲随时间",
    "hover_idle_column": "<b>GPU 有 {share}% 的时间空闲</b><br>{a}–{b} ms",
}
