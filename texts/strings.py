"""Every sentence the demo shows, in English and Chinese, keyed by name.

The explanations use the article's own terms (token pool, scheduler stream and engine stream,
``wait_stream``, lag one) and say what to look for in the picture. ``t(lang, key)`` falls back to
English for a key a language lacks, so a missing translation shows English, never an error.
"""

from __future__ import annotations

import re

from texts import memory as text_memory
from texts import metrics as text_metrics
from texts import summary as text_summary
from texts import teach as text_teach
from texts import traces as text_traces

LANGUAGES = {"en": "English", "zh": "中文"}

_EN: dict[str, str] = {
    "title": "# Overlap scheduling, live: watch the GPU stop waiting for the CPU",
    "intro": (
        "A small LLM engine runs the same requests with the **normal** (serial) loop and the "
        "**overlap** loop of SGLang-style schedulers (and, if you like, **multi-step** overlap), "
        "and draws what the scheduler's CPU thread and the GPU did at every decode step: red "
        "hatched bands are time the GPU had nothing to do. On a machine without a GPU, a "
        "separate device process plays the GPU. It teaches from the Chinese article *SGLang 双 "
        "Stream 重叠调度：如何把 CPU 后处理藏到 GPU 计算背后* (\"SGLang's two-stream overlap "
        "scheduling: how to hide the CPU's post-processing behind the GPU's compute\"), which "
        "explains why a serial loop leaves the GPU idle between forwards and how a GPU-resident "
        "token pool and two CUDA streams hide the CPU's work, reading Mini-SGLang's scheduler "
        "(`python/minisgl/scheduler/scheduler.py`)."),
    "timeline_help": """
### What to look for
- **Lanes.** *CPU* is the scheduler thread: `receive`, `schedule`, `launch`, `process_last`
  (read the sampled tokens, check stops, free finished requests), `wait`. The
  **scheduler stream** carries metadata uploads, the **engine stream** the forward and `sample`.
  Without a GPU, a separate **device process** plays it: its lanes are measured, not simulated.
- **Red hatched bands = GPU idle** while requests wait or run.
- **GPU time, added up** (under each loop's lanes): its idle gaps laid end to end from 0 in red,
  then its busy time in grey, on the same time axis: the shorter red bar is the loop that kept
  the GPU busier.
- **Normal loop:** a red band after every decode: the GPU waits while the CPU reads the token,
  checks stops and builds the next batch.
- **Overlap loop:** the sampled token stays on the GPU in the **token pool**, so the next forward
  never waits for the CPU: find `process_last` of step *n−1* under the decode bar of step *n*.
  The forward still waits for its own metadata upload (`wait_stream`) and, by stream order,
  for the forward before it, which wrote its input tokens into the pool: neither is a wait on
  the CPU.
- **Lag one:** the CPU sees a stop one step late; the extra token is dropped.

More (where the result copy runs, KV memory, the recorder's own cost): *Reading the timeline*
in the walkthrough, `docs/walkthrough.md`.
""",
    "zoom_help": (
        "**Step window.** Both runs are cut to the same step numbers (a run with fewer steps "
        "stops at its last) and start at 0 ms. A step runs "
        "from the start of its forward to the start of the next one (the step time the table "
        "measures), so each panel holds exactly the chosen forwards and its length is their "
        "step times: the shorter panel is the faster loop. The CPU's work is drawn as it fell "
        "in that time: in the overlap run, process_last of the previous step sits under each "
        "forward."),
    "zoom_need_steps": "Enter a first and a last step (whole numbers) to zoom to.",
    "zoom_order": "The first step ({first}) comes after the last ({last}): enter the earlier one "
                  "first.",
    "zoom_outside": "These runs have steps {low} to {high}: steps {first} to {last} lie outside "
                    "them.",
    "zoom_cut": "These runs have steps {low} to {high}: the window is cut to them.",
    "metrics_help": """
### The article's formula, measured
A serial step costs **T_fwd + T_sched + T_post**; an overlapped step costs
**max(T_fwd, T_sched + T_post)** plus a small sync. The table plugs in the terms measured in the
serial run. The gain is largest when CPU work per step is close to the forward time: small
models, fast GPUs, heavy schedulers (try the *extra CPU work* slider). CUDA graphs are a
different fix: they cut launch cost *inside* a forward, overlap removes the gap *between*
forwards. They compose.

**Multi-step overlap** answers CPU work longer than a forward: k forwards per scheduling
iteration, each fed by the one before through the token pool, so a step costs about
**max(T_fwd, (T_sched + T_post) / k)**. One scheduling pass lays out all k steps and uploads
their metadata in one copy, so each further forward costs the CPU little more than its launch.
The price is lag k: stop checks come up to k steps late, so finished requests run extra forwards
(wasted tokens), shown beside the gain.

**When the measurement and the formula differ** by more than 10%, a note says what the runs
measured that the formula leaves out, in ms per step: a serial step that was not the sum of its
terms, an overlapped step longer than the longer of its own, a forward or CPU work that changed
between the runs, other programs on the machine. **GPU busy** is given two ways: over *all
stream lanes* and over the *engine stream alone*; where they differ, the GPU was moving bytes
(uploads, copies), not computing.
""",
    "recorded_help": (
        "Runs recorded on a real GPU, with the CLI (`python -m engine --mode both|all --json ...`) "
        "or, for `h200-first-click-defaults`, by this page's own handler with the defaults a "
        "page load sets on that GPU (`python -m studies gpu-first-click`): there the page sizes "
        "the extra CPU work to the forward it measured (20 µs a step on the H200 that recorded "
        "it, CUDA graphs), "
        "where a CPU page starts at 4000 µs, eager. `cpu-2core-defaults` is the page's default "
        "click on this project's 2-core CPU on a quiet machine, made the same way: a run a busy "
        "machine disturbed offers it. All are drawn with the same charts and labelled with their "
        "hardware and date."),
    "no_recorded": "No recorded GPU runs are bundled yet (`assets/recorded/*.json`).",
    "no_runs": "Press Run on the Live run tab, or choose a recorded or imported run, to draw "
               "the timelines.",
    "zoom_after_run": "The step window is drawn when the run has finished.",
    "time_axis": "time since the run started (ms)",
    "time_axis_window": "time since the window's first step (ms)",
    "gpu_idle": "GPU idle",
    "hover_bar": ("<b>%{customdata[0]}</b> · %{customdata[5]}<br>step %{customdata[1]}"
                  "<br>start %{customdata[6]:.3f} ms · duration %{customdata[2]:.3f} ms"
                  "<br>batch size %{customdata[3]} · tokens %{customdata[4]}%{customdata[7]}"
                  "<extra></extra>"),
    "hover_gap": "start %{customdata:.3f} ms · %{x:.3f} ms<extra></extra>",
    "run_title": "{label}: GPU idle {idle} ms in {gaps}",
    "run_title_active": "{label}, while requests were in the system ({share}% of the time): "
                        "GPU idle {idle} ms in {gaps}",
    "n_gaps": "{n} gaps",
    "n_gaps_one": "{n} gap",
    "n_forwards": "{n} forwards",
    "n_forwards_one": "{n} forward",
    "run_busy": "GPU busy {busy}",
    "busy_two_ways": "{both}% all stream lanes, {engine}% engine stream alone",
    "busy_gpu_lanes": "{both}% (its GPU lanes together)",
    "no_requests": "no request in the system",
    "window_steps": "steps {first}–{last}: {forwards} in {ms} ms",
    "so_far": "so far (running)",
    "texts_count": "{shown} of {total} requests, as the last run produced them.",
    "loopname_normal": "normal",
    "loopname_overlap": "overlap",
    "loopname_multistep": "multistep k={k}",
    "loopname_imported": "imported: {source}",
    "lane_cpu_thread": "CPU thread {thread}",
    "kind_cpu-process": "CPU, separate device process",
    "kind_cpu-inline": "CPU, in-process fallback: serial, no real overlap",
    "kind_cuda": "CUDA",
    "model_shape": "shape",
    "texts_same": "✓ The runs produced identical token ids for every request.",
    "texts_differ": "The runs' token ids differ (expected only with temperature > 0).",
    "texts_same_each": "✓ Each engine's loops produced identical token ids for every request "
                       "(engines are compared with each other by time, not by tokens).",
    "texts_differ_each": "One engine's loops gave different token ids (expected only with "
                         "temperature > 0).",
    "col_request": "request",
    "col_finish": "finish",
    "finish_stop": "stop",
    "finish_length": "length",
    "finish_abort": "abort",
    "col_tokens": "prompt → output tokens",
    "col_text": "text",
    "lane_cpu": "CPU (scheduler thread)",
    "lane_scheduler_stream": "scheduler stream",
    "lane_engine_stream": "engine stream",
    "lane_copy_stream": "copy stream",
    "status_running": "Running <b>{mode}</b> (run {index} of {total}): step {step} of about "
                      "{expected}, {seconds:.1f} s",
    "status_timing": "Timing <b>{mode}</b> (run {index} of {total}; {seconds:.1f} s so far). Each "
                     "run is drawn when it ends: while a loop is timed, the browser stays off "
                     "the cores.",
    "status_drawing": "All {total} runs done in {seconds:.1f} s: drawing them…",
    "status_rounds": "Each loop runs {rounds} times, the loops taking turns, so that a burst of "
                     "other load hits both alike; the round in which other programs used the "
                     "least of the machine is kept.",
    "note_rounds": "Shown: the quietest of {rounds} rounds.",
    "status_starting": "Starting {loops} loop(s) of about {steps} steps each.",
    "status_starting_arrivals": "Starting {loops} loop(s); in each, the requests arrive over about "
                                "{span:.0f} s.",
    "status_running_arrivals": "Running <b>{mode}</b> (run {index} of {total}): step {step}, "
                               "{seconds:.1f} s; the requests arrive over about {span:.0f} s",
    "status_estimate": "Expected time: about {seconds:.0f} s (measured: {step_ms:.1f} ms a step).",
    "status_no_estimate": "The time estimate comes after the first run of this setup.",
    "status_loading": "Loading the model in the scheduler process…",
    "status_stopping": "Stopping: the run ends at the scheduler's next step.",
    "status_stopping_probe": "Stopping: the probe run that picks each request's stop token ends "
                             "first, then the run stops.",
    "timeline_stopped": "The run was stopped before its first step: nothing ran to draw. Press "
                        "Run to start again.",
    "zoom_stopped": "The run was stopped before it finished: there is no step window to draw. "
                    "Press Run to start again.",
    "placement_os": "Placement: the OS placed the scheduler, the device process and the web "
                    "server on any core (none pinned).",
    "placement_pinned": "Placement: scheduler on core {sched_cores}, device process on core "
                        "{device_cores}, web server on core {server_cores} (pinned).",
    "fail_invalid": "The engine refused these settings.",
    "fail_cancelled": "Stopped: the run was ended before it finished. Press Run to start again.",
    "fail_device": "The device process stopped during the run. It is restarted for the next run:"
                   " press Run again.",
    "fail_died": "The scheduler process stopped during the run. It is restarted for the next "
                 "run: press Run again.",
    "fail_error": "The run failed.",
    "fail_detail": "technical detail",
    # An emptied box and a number too large for the browser (1e400) reach the page alike.
    "error_empty": "{control} is empty or too large to read: enter a number from {low} to "
                   "{high}.",
    "error_range": "{control} must be from {low} to {high}; got {value}.",
    "error_whole": "{control} must be a whole number from {low} to {high}; got {value}.",
    "error_model": "{model} is neither a model in the list nor a Hugging Face hub id (such as "
                   "Qwen/Qwen2.5-0.5B-Instruct); paths on this server are not accepted.",
    "error_model_empty": "The model box is empty: pick a model or type a hub id.",
    "error_rate_slow": "At {rate:g} requests/s, {requests} requests take about {seconds:.0f} s "
                       "to arrive; a run here allows {limit:.0f} s. Raise the rate or lower the "
                       "number of requests.",
    "name_request_rate": "Request rate",
    "name_shared_prefix": "Shared system prompt",
    "name_kv_pages": "KV pages",
    "ctl_shared_prefix": "Shared system prompt (tokens before every prompt; the prefix cache "
                         "computes it once)",
    "ctl_kv_pages": "KV pages (16 tokens each; 0 = enough for every request, fewer: requests "
                    "are retracted when the pool runs dry)",
    "error_kv_pages": "KV pages must be 0 (enough for every request) or at least {need}, the "
                      "pages of one request at full length ({tokens} tokens); got {value}.",
    "fail_model": "The model could not be loaded: not found, refused by a guard, or not "
                  "downloadable here (the reason is below).",
    "fail_offline": "The model is not downloaded yet and the Hugging Face hub cannot be reached "
                    "from this machine: pick the bundled model or a shape preset, or run the app "
                    "where a network exists (the detail is below).",
    "status_hub_checking": "Checking {model} on the Hugging Face hub…",
    "status_download": "Downloading {model}: {done:.1f} of {total:.1f} MiB…",
    "status_hub_ready": "{model}: {total:.1f} MiB of weights ready; loading…",
    "error_device": "Unknown device {device}.",
    "error_seed": "The workload seed must be a whole number from 0 to 2147483647; got {value}.",
    "name_requests": "Requests",
    "name_seed": "The workload seed",
    "name_batch": "Batch size",
    "name_prompt_len": "Prompt length",
    "name_max_new": "Max new tokens",
    "name_temperature": "Temperature",
    "name_extra_cpu_us": "Extra CPU work",
    "name_decode_steps": "k (multi-step)",
    "ctl_stop": "Stop",
    "device_auto": "auto",
    "device_no_cuda": "CUDA is not offered: no GPU was found on this machine.",
    "process_note": (
        "*The engine runs in a scheduler process of its own, as SGLang runs it: the web server "
        "draws, the scheduler schedules, and neither waits for the other's Python lock.*"),
    "status_done": "Done: {requests} requests, {tokens} output tokens per run, on {where} "
                   "({device}).",
    "status_recorded": "Recorded on {where}.",
    "engine_mini-sglang": "Mini-SGLang (the article's code)",
    "engine_sglang": "SGLang (the system the article describes)",
    "engine_ours": "this project's engine",
    "detail_ours": "this project",
    "detail_graphs": "CUDA graphs",
    "detail_eager": "eager",
    "detail_compiled": "compiled",
    "detail_triton": "triton attention",
    "detail_flashinfer": "FlashInfer attention",
    "detail_device_process": "separate device process",
    "record_commit": "commit {commit}",
    "record_release": "release {release}",
    "engine_named": "{engine_name}",
    "status_recorded_by": "Made by {engine}.",
    "status_recorded_by_code": "Made by {engine}, {code}.",
    "recorded_same_work": "Same work, {engines} engines side by side",
    "recorded_same_work_none": "No other engine recorded this record's workload.",
    "status_run_on": "A run is in progress.",
    "status_same_work": "{engines} engines on the same work, every loop on one time axis: "
                        "{names} ({where}).",
    "peer_title_sglang": "SGLang's own loops: what this record shows",
    "peer_section_sglang": (
        "These are SGLang's own loops (github <code>sgl-project/sglang</code>, release 0.5.17), "
        "on the same work as this project's engine. This project's recorder was hooked into its "
        "scheduler process as one of its plugins (its phases <code>recv_requests</code>, "
        "<code>get_next_batch_to_run</code>, <code>run_batch</code>, "
        "<code>process_batch_result</code>, and CUDA events on its schedule, forward and copy "
        "streams: <code>studies/peers/sglang/hook.py</code>), so the engines are measured by one "
        "instrument; the hook cost it {hook_a:+.1f}% (serial) and {hook_b:+.1f}% (overlap). Its "
        "serial step takes {step_ms:.2f} ms: {terms}, so the GPU is busy {busy_a:.0f}% of the "
        "time. In its overlap loop that work "
        "runs under the forward: {step_b_ms:.2f} ms a step, {busy_b:.0f}% busy, {gain:.2f}× per "
        "decode step (<code>python -m studies peers sglang</code>, docs/benchmarks.md)."),
    # A serial step's terms, said so that they add up to the step as printed.
    "peer_terms_sum": "a {fwd_ms:.2f} ms forward and {cpu_ms:.2f} ms of CPU work",
    "peer_terms_waited": ("a {fwd_ms:.2f} ms forward, {cpu_ms:.2f} ms of CPU work and "
                          "{rest_ms:.2f} ms of waiting that is neither (the result copy, the "
                          "device's answer)"),
    "peer_terms_overlapped": ("a {fwd_ms:.2f} ms forward and {cpu_ms:.2f} ms of CPU work, "
                              "{rest_ms:.2f} ms of which ran while the forward ran (launching a "
                              "forward is CPU work that goes on while the forward runs)"),
    "peer_title": "The article's own code: what this record shows",
    "peer_section": (
        "These are Mini-SGLang's own loops (github <code>sgl-project/mini-sglang</code>, the "
        "code the article reads), on the same work as this project's engine. This project's "
        "recorder was hooked into its scheduler (<code>_schedule_next_batch</code>, "
        "<code>_forward</code>, <code>_process_last_data</code> and CUDA events on its two "
        "streams: <code>studies/peers/minisglang/hook.py</code>), so both engines are measured "
        "by one instrument; the hook cost it {hook_a:+.1f}% (serial) and {hook_b:+.1f}% (overlap). Its "
        "serial step takes {step_ms:.2f} ms: {terms}, so the GPU is busy {busy_a:.0f}% of the "
        "time. In its overlap loop that work "
        "runs under the forward: {step_b_ms:.2f} ms a step, {busy_b:.0f}% busy, {gain:.2f}× per "
        "decode step. Overlap hides the CPU's share of a serial step, so a scheduler that does "
        "more per step gains more from it; this project's scheduler does less, and its engine "
        "is faster end to end in both loops (<code>python -m studies peers mini-sglang</code>, "
        "docs/benchmarks.md)."),
    "status_settings": "Run with: {model}, B = {batch}, {graphs}, {extra} µs of extra CPU work a "
                       "step.",
    "status_settings_copy": "Result copy on the {copy}.",
    "status_settings_kv": "KV pool of {kv_pages} pages.",
    "status_settings_prefix": "A shared system prompt of {prefix} tokens.",
    "status_imported": "Imported {name} ({where})",
    "status_imported_unlabelled": "Imported {name} (the file does not say what hardware it was "
                                  "recorded on).",
    "status_cannot_show": "Cannot show {name}: it is not a run record or a trace this page can read.",
    "status_broken_gzip": "Cannot show {name}: it is a gzip file that ends too early or is "
                          "damaged (a download cut short?). Upload the whole file.",
    "status_not_a_trace": "Cannot show {name}: it is {what}, not a run record or a trace. Upload "
                          "a .json or .json.gz file: a torch.profiler trace or a run record saved "
                          "from this page.",
    "file_png": "a PNG image",
    "file_jpeg": "a JPEG image",
    "file_gif": "a GIF image",
    "file_riff": "a media file (WebP, WAV or AVI)",
    "file_pdf": "a PDF document",
    "file_zip": "a ZIP archive",
    "file_bzip2": "a bzip2 archive",
    "file_xz": "an xz archive",
    "file_7z": "a 7z archive",
    "file_empty": "an empty file",
    "file_text": "text that does not start like a JSON object or list",
    "model_real": "tiny model, real weights",
    "model_random": "random weights, timing only",
    "model_hub": "hub, fetched on first use",
    "model_hub_ready": "hub, downloaded",
    # controls
    "ctl_device": "Device",
    "ctl_model": "Model (or type a hub id, e.g. Qwen/Qwen2.5-0.5B-Instruct)",
    "ctl_request_rate": "Request rate (requests/s; 0 = all at the start)",
    "ctl_chat": "Chat: each prompt is a user message, through the model's chat template (a model "
                "without one takes plain text)",
    "ctl_batch": "Batch size (requests decoded together)",
    "ctl_prompt_len": "Prompt length (words)",
    "ctl_prompts": "Prompts (one per line, cycled over the requests)",
    "ctl_temperature": "Temperature (0 = greedy)",
    "ctl_cuda_graph": "CUDA graphs (decode and prefill)",
    "ctl_extra_cpu": "Extra CPU work per step (µs), emulates a heavier scheduler (drawn inside "
                     "process_last)",
    "ctl_run": "Run",
    "ctl_first_step": "First step",
    "ctl_last_step": "Last step",
    "ctl_zoom": "Zoom to steps",
    "ctl_recorded": "Recorded run",
    "tab_live": "Live run",
    "tab_recorded": "Recorded GPU runs",
    "tab_upload": "Import a trace",
    "tab_serving": "Serving: latency vs rate",
    "ctl_serving_file": "Measurement",
    "servingcol_request rate": "request rate",
    "servingcol_loop": "loop",
    "servingcol_runs": "runs",
    "servingcol_output tok/s": "output tok/s",
    "servingcol_req/s": "req/s",
    "servingcol_TTFT ms mean / p50 / p99": "TTFT ms mean / p50 / p99",
    "servingcol_ITL ms mean / p50 / p99": "ITL ms mean / p50 / p99",
    "servingcol_GPU busy": "GPU busy",
    "servingcol_other load": "other load",
    "servingcol_burst": "burst",
    "serving_bench": "{device}, {model} model, extra CPU {extra} µs/step: the engine driven in "
                     "process (python -m bench rates), {requests} requests, {repeats} runs per rate",
    "serving_load": "{device}, {model} model, extra CPU {extra} µs/step: streaming HTTP clients "
                    "against python -m engine.serve (python -m bench load), {requests} requests, "
                    "{repeats} runs per rate",
    "serving_help": (
        "Requests in production do not all arrive at once. Here they arrive by a Poisson process "
        "at a given **request rate**, the same arrival times for both loops, and each loop is "
        "judged as serving benchmarks judge it: **time to first token** (TTFT: queueing, then "
        "prefill), **inter-token latency** (ITL: about one decode step) and output tokens/s. "
        "Points are medians over the repeats, the bars their range.\n\n"
        "What to look for: at low rates the GPU idles between requests whatever the loop, and "
        "throughput equals the offered load; overlap still shortens every step, so ITL drops. "
        "As the rate grows, the serial loop saturates first: its queue grows and TTFT climbs "
        "from tens of milliseconds to seconds, while the overlap loop still keeps up. Set "
        "*Request rate* above 0 in the live run to measure TTFT and ITL of your own workload.\n\n"
        "In the table, *req/s* is the requests completed over the run's length, from the first "
        "arrival to the last finish. With 32 requests it stays below the offered rate even where "
        "the engine keeps up (the random arrivals' own gaps and the last requests' decoding are "
        "part of that length): what shows an engine falling behind is *req/s* no longer growing "
        "with the offered rate while TTFT climbs. *Other load* is the share of the cores that "
        "other programs used meanwhile (a busy machine measures less).\n\n"
        "Re-make a measurement: `python -m bench rates --device cpu --model bundled --rates 2 4 8 "
        "16 inf --requests 32 --prompt-len 32 --new-tokens 64 --repeats 3 --extra-cpu-us 4000 "
        "--json FILE`, or against the HTTP server: `python -m bench load --rates 2 4 8 "
        "--requests 32 --max-tokens 64 --repeats 2 --json FILE`."),
    "dl_record": "Download run record (JSON)",
    "dl_trace": "Download Chrome trace (Perfetto)",
}

_ZH: dict[str, str] = {
    "title": "# 重叠调度现场演示：看 GPU 不再等待 CPU",
    "intro": (
        "一个小型 LLM 推理引擎用**普通**（串行）循环和 SGLang 式调度器的**重叠**循环"
        "（以及可选的**多步**重叠）运行同一批请求，并画出每个解码步里调度器的 CPU 线程和 GPU "
        "分别在做什么：红色斜线是 GPU 无事可做的时间。没有 GPU 的机器上，由一个独立的设备进程扮演 GPU。"
        "它依据的文章是《SGLang 双 Stream 重叠调度：如何把 CPU 后处理藏到 GPU 计算背后》，"
        "讲串行循环为什么让 GPU 在两次前向之间空闲，以及常驻显存的 token pool 和两条 CUDA stream "
        "怎样把 CPU 的工作藏起来；文章读的是 Mini-SGLang 的调度器"
        "（`python/minisgl/scheduler/scheduler.py`）。"),
    "timeline_help": """
### 看什么
- **泳道**。*CPU* 是调度线程：`receive`、`schedule`、`launch`、`process_last`（读取采样 token、
  判停、回收已结束请求）、`wait`。**scheduler stream** 承载元数据上传，**engine stream** 执行前向和
  `sample`。没有 GPU 时，由一个独立的**设备进程**扮演 GPU：它的泳道是实测的，不是模拟的。
- **红色斜线 = GPU 空闲**：有请求在等待或运行，GPU 却无事可做。
- **GPU 时间合计**（每个循环泳道下方）：所有空闲间隙从 0 开始首尾相接（红色），后接忙碌时间（灰色），
  在同一时间轴上：红条更短的循环让 GPU 更忙。
- **普通循环**：每次 decode 之后都有一段红色：CPU 读 token、判停、组下一批时，GPU 在等。
- **重叠循环**：采样出的 token 留在 GPU 上的 **token_pool** 里，下一次前向不再等待 CPU：在第 *n*
  步 decode 条的下方找到第 *n−1* 步的 `process_last`。前向仍要等待自己的元数据上传（`wait_stream`），
  并按 stream 顺序等待前一次前向（它把本次的输入 token 写进了 pool）：两者都不是在等 CPU。
- **滞后一轮**：CPU 晚一步才看到停止；多出的那个 token 被丢弃。

更多内容（结果回传放在哪里、KV 内存、测量工具自身的代价）：见课堂演示步骤中的*读时间线*一节，
`docs/walkthrough.zh.md`。
""",
    "zoom_help": (
        "**步窗口**。两次运行都截取相同编号的步（步数较少的运行截到它的最后一步为止）并从 0 ms 开始。"
        "一步从它的前向开始，到下一次前向开始为止"
        "（即表中测量的每步时间），所以每个面板恰好包含所选的那些前向，长度就是它们的每步时间之和："
        "更短的面板就是更快的循环。CPU 的工作按它在这段时间里实际发生的位置画出：重叠运行中，上一步的 "
        "process_last 位于每次前向的下面。"),
    "zoom_need_steps": "请输入起始步和结束步（整数）后再放大。",
    "zoom_order": "起始步（{first}）在结束步（{last}）之后：请先填较早的那一步。",
    "zoom_outside": "这些运行的步号从 {low} 到 {high}：第 {first} 到 {last} 步不在其中。",
    "zoom_cut": "这些运行的步号从 {low} 到 {high}：窗口截到这个范围。",
    "metrics_help": """
### 文中的公式，代入实测值
串行一步耗时 **T_fwd + T_sched + T_post**；重叠一步耗时 **max(T_fwd, T_sched + T_post)**，
再加少量同步开销。表中代入串行运行实测的各项。每步 CPU 工作与前向时间越接近，收益越大：
小模型、快 GPU、重调度器（试试*额外 CPU 工作*滑块）。CUDA Graph 是另一种优化：它消除一次前向
**内部**的 launch 开销，重叠消除前向**之间**的空隙，两者可以叠加。

**多步重叠**应对比一次前向还长的 CPU 工作：每次调度迭代提交 k 次前向，每次都通过 token_pool
接上一次的输出，于是一步约为 **max(T_fwd, (T_sched + T_post) / k)**。一次调度排好全部 k 步，
元数据一次拷贝上传，所以之后每次前向 CPU 只需付出提交本身。代价是滞后 k 步：判停最多晚 k 步，
已结束的请求会多跑几次前向（浪费的 token），与收益并列显示。

**当实测与公式相差超过 10% 时**，会有一条说明，以每步毫秒数列出各次运行测到、而公式没有计入的：
串行一步并不等于各项之和、重叠一步比它自己较长的一项还长、两次运行之间前向或 CPU 工作的变化、
机器上的其他程序。**GPU 忙碌比例**用两种方式给出：*所有 stream 泳道合计*和 *engine stream 单独*；
两者不同之处，GPU 在搬运数据（上传、回传），而不是在计算。
""",
    "recorded_help": (
        "在真实 GPU 上录制的运行：用命令行（`python -m engine --mode both|all --json ...`），"
        "或者（`h200-first-click-defaults`）由本页面自己的处理函数、用页面在那块 GPU 上加载时设定的默认值录制"
        "（`python -m studies gpu-first-click`）：在那里页面按实测的前向来设定额外 CPU 工作，"
        "录制它的 H200 上开启 CUDA Graph 时为每步 20 µs，而 CPU 页面一开始是 4000 µs、eager 模式。"
        "`cpu-2core-defaults` 是本项目双核 CPU 在空闲时用同样方式录制的页面默认点击：被繁忙机器干扰的"
        "运行会提供它。它们都用同样的图表展示，并标注硬件和日期。"),
    "no_recorded": "尚未附带录制的 GPU 运行（`assets/recorded/*.json`）。",
    "no_runs": "在“现场运行”页点击“运行”，或选择一个录制的或导入的运行，即可绘制时间线。",
    "zoom_after_run": "运行结束后绘制步窗口。",
    "time_axis": "自运行开始的时间（ms）",
    "time_axis_window": "自窗口第一步开始的时间（ms）",
    "gpu_idle": "GPU 空闲",
    "hover_bar": ("<b>%{customdata[0]}</b> · %{customdata[5]}<br>第 %{customdata[1]} 步"
                  "<br>开始 %{customdata[6]:.3f} ms · 时长 %{customdata[2]:.3f} ms"
                  "<br>批大小 %{customdata[3]} · token 数 %{customdata[4]}%{customdata[7]}"
                  "<extra></extra>"),
    "hover_gap": "开始 %{customdata:.3f} ms · %{x:.3f} ms<extra></extra>",
    "run_title": "{label}：GPU 空闲 {idle} ms，共 {gaps}",
    "run_title_active": "{label}，只算系统中有请求的时间（占 {share}%）：GPU 空闲 {idle} ms，共 "
                        "{gaps}",
    "n_gaps": "{n} 段",
    "n_gaps_one": "{n} 段",
    "n_forwards": "{n} 次前向",
    "n_forwards_one": "{n} 次前向",
    "run_busy": "GPU 忙碌：{busy}",
    "busy_two_ways": "所有 stream 泳道合计 {both}%，engine stream 单独 {engine}%",
    "busy_gpu_lanes": "{both}%（其 GPU 泳道合计）",
    "no_requests": "系统中没有请求",
    "window_steps": "第 {first}–{last} 步：{forwards}，共 {ms} ms",
    "so_far": "目前为止（运行中）",
    "texts_count": "共 {total} 个请求，显示 {shown} 个（最后一次运行的输出）。",
    "loopname_normal": "普通",
    "loopname_overlap": "重叠",
    "loopname_multistep": "多步 k={k}",
    "loopname_imported": "导入：{source}",
    "lane_cpu_thread": "CPU 线程 {thread}",
    "kind_cpu-process": "CPU，独立设备进程",
    "kind_cpu-inline": "CPU，进程内回退：串行，没有真正的重叠",
    "kind_cuda": "CUDA",
    "model_shape": "同形",
    "texts_same": "✓ 两次运行对每个请求生成了完全相同的 token id。",
    "texts_differ": "两次运行的 token id 不同（仅在 temperature > 0 时属正常）。",
    "texts_same_each": "✓ 每个引擎的几个循环对每个请求生成了完全相同的 token id"
                       "（引擎之间比的是时间，不是 token）。",
    "texts_differ_each": "有一个引擎的几个循环生成的 token id 不同（仅在 temperature > 0 时属正常）。",
    "col_request": "请求",
    "col_finish": "结束原因",
    "finish_stop": "停止",
    "finish_length": "达到长度上限",
    "finish_abort": "中止",
    "col_tokens": "提示 → 输出 token",
    "col_text": "文本",
    "lane_cpu": "CPU（调度线程）",
    "lane_scheduler_stream": "scheduler stream",
    "lane_engine_stream": "engine stream",
    "lane_copy_stream": "copy stream",
    "status_running": "正在运行 <b>{mode}</b>（第 {index}/{total} 次运行）：第 {step} 步（约 "
                      "{expected} 步），{seconds:.1f} 秒",
    "status_timing": "正在计时 <b>{mode}</b>（第 {index}/{total} 次运行；已用 {seconds:.1f} 秒）。"
                     "每次运行结束后才绘制：循环计时期间，浏览器不占用核心。",
    "status_drawing": "{total} 次运行全部完成，用时 {seconds:.1f} 秒：正在绘制…",
    "status_rounds": "每个循环运行 {rounds} 次，各循环轮流进行，这样突发的其他负载会同样落在两者身上；"
                     "保留其他程序占用机器最少的那一轮。",
    "note_rounds": "显示的是 {rounds} 轮中最空闲的一轮。",
    "status_starting": "开始运行 {loops} 个循环，每个约 {steps} 步。",
    "status_starting_arrivals": "开始运行 {loops} 个循环；每个循环中，请求在约 {span:.0f} 秒内陆续到达。",
    "status_running_arrivals": "正在运行 <b>{mode}</b>（第 {index}/{total} 次运行）：第 {step} 步，"
                               "{seconds:.1f} 秒；请求在约 {span:.0f} 秒内陆续到达",
    "status_estimate": "预计耗时：约 {seconds:.0f} 秒（实测每步 {step_ms:.1f} ms）。",
    "status_no_estimate": "这个配置第一次运行之后才能给出耗时估计。",
    "status_loading": "正在调度进程中加载模型…",
    "status_stopping": "正在停止：运行将在调度器的下一步结束。",
    "status_stopping_probe": "正在停止：先结束为每个请求选出停止 token 的探测运行，然后运行停止。",
    "timeline_stopped": "运行在第一步之前就被停止了：没有运行过的内容可画。点击“运行”重新开始。",
    "zoom_stopped": "运行在完成之前被停止了：没有可画的步窗口。点击“运行”重新开始。",
    "placement_os": "进程放置：调度进程、设备进程和 Web 服务器由操作系统分配到任意核心（未绑定）。",
    "placement_pinned": "进程放置：调度进程在核心 {sched_cores}，设备进程在核心 {device_cores}，"
                        "Web 服务器在核心 {server_cores}（已绑定）。",
    "fail_invalid": "引擎拒绝了这些设置。",
    "fail_cancelled": "已停止：运行在完成之前被结束。点击“运行”重新开始。",
    "fail_device": "设备进程在运行中停止了。下一次运行会重新启动它：请再次点击“运行”。",
    "fail_died": "调度进程在运行中停止了。下一次运行会重新启动它：请再次点击“运行”。",
    "fail_error": "运行失败。",
    "fail_detail": "技术细节",
    "error_empty": "{control}为空或数字大到无法读取：请输入 {low} 到 {high} 之间的数。",
    "error_range": "{control}必须在 {low} 到 {high} 之间；收到的是 {value}。",
    "error_whole": "{control}必须是 {low} 到 {high} 之间的整数；收到的是 {value}。",
    "error_model": "{model} 既不是列表中的模型，也不是 Hugging Face Hub 的模型 id（例如 "
                   "Qwen/Qwen2.5-0.5B-Instruct）；不接受这台服务器上的路径。",
    "error_model_empty": "模型框为空：请选择一个模型或输入 Hub 模型 id。",
    "error_rate_slow": "按每秒 {rate:g} 个请求，{requests} 个请求大约需要 {seconds:.0f} 秒才能全部到达；"
                       "这里一次运行最多 {limit:.0f} 秒。请提高速率或减少请求数。",
    "name_request_rate": "请求速率",
    "name_shared_prefix": "共享系统提示",
    "name_kv_pages": "KV 页数",
    "ctl_shared_prefix": "共享系统提示（每个提示前的 token 数；前缀缓存只计算一次）",
    "ctl_kv_pages": "KV 页数（每页 16 个 token；0 = 够所有请求用，更少：页池用尽时撤回请求）",
    "error_kv_pages": "KV 页数必须为 0（够所有请求用）或至少 {need}，即一个请求满长度（{tokens} 个 token）"
                      "所需的页数；收到的是 {value}。",
    "fail_model": "无法加载该模型：找不到、被安全检查拒绝，或在这里无法下载（原因见下方）。",
    "fail_offline": "该模型尚未下载，而这台机器无法访问 Hugging Face Hub：请选择附带的模型或同形预设，"
                    "或在能联网的地方运行本应用（细节见下方）。",
    "status_hub_checking": "正在 Hugging Face Hub 上检查 {model}…",
    "status_download": "正在下载 {model}：{done:.1f} / {total:.1f} MiB…",
    "status_hub_ready": "{model}：{total:.1f} MiB 权重已就绪，正在加载…",
    "error_device": "未知设备 {device}。",
    "error_seed": "负载种子必须是 0 到 2147483647 之间的整数；收到的是 {value}。",
    "name_requests": "请求数",
    "name_seed": "负载种子",
    "name_batch": "批大小",
    "name_prompt_len": "提示长度",
    "name_max_new": "最大新 token 数",
    "name_temperature": "温度",
    "name_extra_cpu_us": "额外 CPU 工作",
    "name_decode_steps": "k（多步）",
    "ctl_stop": "停止",
    "device_auto": "自动",
    "device_no_cuda": "未提供 CUDA：这台机器上没有找到 GPU。",
    "process_note": (
        "*引擎在自己的调度进程中运行，和 SGLang 一样：网页服务器负责绘图，调度器负责调度，"
        "彼此不等待对方的 Python 锁。*"),
    "status_done": "完成：{requests} 个请求，每次运行输出 {tokens} 个 token，设备：{where}"
                   "（{device}）。",
    "status_recorded": "录制于 {where}。",
    "engine_mini-sglang": "Mini-SGLang（文章所读的代码）",
    "engine_sglang": "SGLang（文章所讲的系统）",
    "engine_ours": "本项目的引擎",
    "detail_ours": "本项目",
    "detail_graphs": "CUDA Graph",
    "detail_eager": "eager 模式",
    "detail_compiled": "已编译",
    "detail_triton": "Triton 注意力",
    "detail_flashinfer": "FlashInfer 注意力",
    "detail_device_process": "独立设备进程",
    "record_commit": "提交 {commit}",
    "record_release": "版本 {release}",
    "engine_named": "{engine_name}",
    "status_recorded_by": "由{engine}录制。",
    "status_recorded_by_code": "由{engine}录制，{code}。",
    "recorded_same_work": "同一负载：{engines} 个引擎并排",
    "recorded_same_work_none": "没有其他引擎录制过这份记录的负载。",
    "status_run_on": "正在运行。",
    "status_same_work": "{engines} 个引擎跑同一负载，所有循环在同一时间轴上：{names}（{where}）。",
    "peer_title_sglang": "SGLang 自己的循环：这份记录说明什么",
    "peer_section_sglang": (
        "这是 SGLang 自己的两种循环（github <code>sgl-project/sglang</code>，0.5.17 版），跑的是与"
        "本项目引擎相同的工作。本项目的记录器以插件的方式挂进了它的调度进程（它的阶段 "
        "<code>recv_requests</code>、<code>get_next_batch_to_run</code>、<code>run_batch</code>、"
        "<code>process_batch_result</code>，以及它的调度流、前向流和拷贝流上的 CUDA 事件："
        "<code>studies/peers/sglang/hook.py</code>），所以各引擎用同一件仪器测量；钩子让它变慢 "
        "{hook_a:+.1f}%（串行）和 {hook_b:+.1f}%（重叠）。它的串行一步 {step_ms:.2f} ms："
        "{terms}，所以 GPU 只有 {busy_a:.0f}% 的时间在忙。重叠"
        "循环里这些工作跑在前向下面：每步 {step_b_ms:.2f} ms，忙碌 {busy_b:.0f}%，每个解码步快 "
        "{gain:.2f}×（<code>python -m studies peers sglang</code>，docs/benchmarks.md）。"),
    "peer_terms_sum": "前向 {fwd_ms:.2f} ms，CPU 工作 {cpu_ms:.2f} ms",
    "peer_terms_waited": ("前向 {fwd_ms:.2f} ms，CPU 工作 {cpu_ms:.2f} ms，另有 {rest_ms:.2f} ms "
                          "既非前向也非 CPU 工作的等待（结果拷贝、设备的应答）"),
    "peer_terms_overlapped": ("前向 {fwd_ms:.2f} ms，CPU 工作 {cpu_ms:.2f} ms，其中 {rest_ms:.2f} ms "
                              "与前向同时进行（发射前向本身是 CPU 工作，前向开始后仍在继续）"),
    "peer_title": "原文自己的代码：这份记录说明什么",
    "peer_section": (
        "这是 Mini-SGLang 自己的两种循环（github <code>sgl-project/mini-sglang</code>，即原文所读的"
        "代码），跑的是与本项目引擎相同的工作。本项目的记录器挂进了它的调度器"
        "（<code>_schedule_next_batch</code>、<code>_forward</code>、<code>_process_last_data</code>，"
        "以及它两条 stream 上的 CUDA 事件：<code>studies/peers/minisglang/hook.py</code>），"
        "所以两个引擎用同一件仪器测量；钩子让它变慢 {hook_a:+.1f}%（串行）和 {hook_b:+.1f}%（重叠）。"
        "它的串行一步 {step_ms:.2f} ms：{terms}，所以 GPU 只有 "
        "{busy_a:.0f}% 的时间在忙。重叠循环里这些工作跑在前向下面：每步 {step_b_ms:.2f} ms，"
        "忙碌 {busy_b:.0f}%，每个解码步快 {gain:.2f}×。重叠藏起的是串行一步中 CPU 的那一份，所以"
        "调度器每步做得越多，收益越大；本项目的调度器做得少，而它的引擎在两种循环里端到端都更快"
        "（<code>python -m studies peers mini-sglang</code>，docs/benchmarks.md）。"),
    "status_settings": "运行设置：{model}，B = {batch}，{graphs}，每步额外 CPU 工作 {extra} µs。",
    "status_settings_copy": "结果回传在 {copy} 上。",
    "status_settings_kv": "KV 页池共 {kv_pages} 页。",
    "status_settings_prefix": "共享系统提示 {prefix} 个 token。",
    "status_imported": "已导入 {name}（{where}）",
    "status_imported_unlabelled": "已导入 {name}（文件中没有说明它是在什么硬件上录制的）。",
    "status_cannot_show": "无法显示 {name}：它不是本页能读取的运行记录或 trace。",
    "status_broken_gzip": "无法显示 {name}：这个 gzip 文件提前结束或已损坏（下载被中断了？）。"
                          "请上传完整的文件。",
    "status_not_a_trace": "无法显示 {name}：它是{what}，不是运行记录或 trace。请上传 .json 或 .json.gz "
                          "文件：torch.profiler trace，或从本页保存的运行记录。",
    "file_png": "一张 PNG 图片",
    "file_jpeg": "一张 JPEG 图片",
    "file_gif": "一张 GIF 图片",
    "file_riff": "一个媒体文件（WebP、WAV 或 AVI）",
    "file_pdf": "一份 PDF 文档",
    "file_zip": "一个 ZIP 压缩包",
    "file_bzip2": "一个 bzip2 压缩包",
    "file_xz": "一个 xz 压缩包",
    "file_7z": "一个 7z 压缩包",
    "file_empty": "一个空文件",
    "file_text": "一段不以 JSON 对象或列表开头的文本",
    "model_real": "小模型，真实权重",
    "model_random": "随机权重，仅用于计时",
    "model_hub": "Hub，首次使用时下载",
    "model_hub_ready": "Hub，已下载",
    "ctl_device": "设备",
    "ctl_model": "模型（也可输入 Hub 模型 id，例如 Qwen/Qwen2.5-0.5B-Instruct）",
    "ctl_request_rate": "请求速率（每秒请求数；0 = 全部在开始时到达）",
    "ctl_chat": "对话：每条提示词作为用户消息，经过模型的对话模板（没有模板的模型按纯文本输入）",
    "ctl_batch": "批大小（一起解码的请求数）",
    "ctl_prompt_len": "提示长度（词）",
    "ctl_prompts": "提示（每行一条，循环分配给各请求）",
    "ctl_temperature": "温度（0 = 贪心）",
    "ctl_cuda_graph": "CUDA Graph（解码与预填充）",
    "ctl_extra_cpu": "每步额外 CPU 工作（µs），模拟更重的调度器（画在 process_last 里）",
    "ctl_run": "运行",
    "ctl_first_step": "起始步",
    "ctl_last_step": "结束步",
    "ctl_zoom": "放大到这些步",
    "ctl_recorded": "录制的运行",
    "tab_live": "现场运行",
    "tab_recorded": "录制的 GPU 运行",
    "tab_upload": "导入 trace",
    "tab_serving": "服务：延迟与请求速率",
    "ctl_serving_file": "测量结果",
    "servingcol_request rate": "请求速率",
    "servingcol_loop": "循环",
    "servingcol_runs": "次数",
    "servingcol_output tok/s": "输出 token/秒",
    "servingcol_req/s": "请求/秒",
    "servingcol_TTFT ms mean / p50 / p99": "TTFT 毫秒 均值 / p50 / p99",
    "servingcol_ITL ms mean / p50 / p99": "ITL 毫秒 均值 / p50 / p99",
    "servingcol_GPU busy": "GPU 忙碌",
    "servingcol_other load": "其他负载",
    "servingcol_burst": "突发",
    "serving_bench": "{device}，{model} 模型，每步额外 CPU {extra} µs：进程内直接驱动引擎"
                     "（python -m bench rates），{requests} 个请求，每个速率 {repeats} 次",
    "serving_load": "{device}，{model} 模型，每步额外 CPU {extra} µs：流式 HTTP 客户端请求 "
                    "python -m engine.serve（python -m bench load），{requests} 个请求，每个速率 "
                    "{repeats} 次",
    "serving_help": (
        "生产环境中的请求不会同时到达。这里请求按给定**请求速率**的泊松过程到达，两种循环使用相同的到达"
        "时间，并按服务基准的方式评判：**首 token 延迟**（TTFT：排队加 prefill）、**token 间延迟**"
        "（ITL：大约一个解码步）和每秒输出 token 数。点是多次重复的中位数，误差线是其范围。\n\n"
        "看什么：速率低时，无论哪种循环，GPU 都会在请求之间空闲，吞吐量等于到达的负载；但重叠循环仍然"
        "缩短了每一步，所以 ITL 更低。速率升高后，串行循环先饱和：队列变长，TTFT 从几十毫秒涨到几秒，"
        "而重叠循环还能跟上。在现场运行中把*请求速率*设为大于 0，即可测量你自己工作负载的 TTFT 和 ITL。"
        "\n\n"
        "表中*请求/秒*是完成的请求数除以运行时长（从第一个请求到达到最后一个请求结束）。只有 32 个"
        "请求时，即使引擎跟得上，它也低于到达速率（随机到达本身的间隔和最后几个请求的解码都算在时长里）："
        "引擎跟不上的标志是到达速率升高时*请求/秒*不再增长、而 TTFT 不断上升。*其他负载*是同一时间其他"
        "程序占用核心的比例（机器繁忙时测得的数字更低）。\n\n"
        "重新测量：`python -m bench rates --device cpu --model bundled --rates 2 4 8 16 inf "
        "--requests 32 --prompt-len 32 --new-tokens 64 --repeats 3 --extra-cpu-us 4000 --json "
        "FILE`，或者针对 HTTP 服务：`python -m bench load --rates 2 4 8 --requests 32 "
        "--max-tokens 64 --repeats 2 --json FILE`。"),
    "dl_record": "下载运行记录（JSON）",
    "dl_trace": "下载 Chrome trace（Perfetto）",
}

for part in (text_teach, text_metrics, text_memory, text_summary, text_traces):
    _EN.update(part.EN)
    _ZH.update(part.ZH)

# The Chinese texts are wrapped in the source like the English ones, but where a line break falls
# between two Chinese characters (or their punctuation) Markdown would show it as a space, which
# Chinese does not put between words: such breaks are joined here, once.
_CJK = "[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]"
_CJK_END = re.compile(_CJK + r"\**$")       # a Chinese character, or *emphasis* around one
_CJK_START = re.compile(r"\**" + _CJK)      # never a list item's "* "


def _join_cjk_breaks(text: str) -> str:
    """``text`` with each line break between two Chinese characters removed, except after a
    heading line (a heading ends at its line; joining would pull the paragraph into it)."""
    lines = text.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        prev, stripped = out[-1], line.lstrip(" \t")
        if (_CJK_END.search(prev) and _CJK_START.match(stripped)
                and not prev.lstrip().startswith("#")):
            out[-1] = prev + stripped
        else:
            out.append(line)
    return "\n".join(out)


_ZH = {key: _join_cjk_breaks(text) for key, text in _ZH.items()}
STRINGS: dict[str, dict[str, str]] = {"en": _EN, "zh": _ZH}


def t(lang: str, key: str) -> str:
    """The string ``key`` in ``lang`` ("en" or "zh"), falling back to English."""
    return STRINGS.get(lang, _EN).get(key, _EN[key])


def sentence_gap(lang: str) -> str:
    """What goes between two sentences joined in ``lang``: a space, or none after a Chinese full
    stop."""
    return "" if lang == "zh" else " "


def label_colon(lang: str) -> str:
    """What follows a label before its value: ": ", or a full-width colon (no space) in Chinese."""
    return "：" if lang == "zh" else ": "


def ordinal(lang: str, n: int) -> str:
    """``n`` as a place in line: "1st", "12th", "23rd" in English; in Chinese the number itself
    (its sentences say 第 n 位 around it)."""
    if lang == "zh":
        return str(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def count(lang: str, n: int, noun: str) -> str:
    """``n`` with its noun in ``lang``: "1 gap", "12 gaps" (keys ``n_<noun>``, ``n_<noun>_one``)."""
    return t(lang, f"n_{noun}_one" if n == 1 else f"n_{noun}").format(n=n)
