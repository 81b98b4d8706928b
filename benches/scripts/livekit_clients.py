"""Issue 38's benchmark client: TruGen's official SDK (trugen-sdk 1.1.0 on LiveKit's Python client livekit
1.2.0, the suite's pinned venv) joining Confab agents. Driven by `benches/benches/call_paths.rs`.

    python livekit_clients.py joins BASE_URL API_KEY AGENT_ID N
        N joins one after another: `create_session` → `connect` → first decoded agent video frame →
        `disconnect`. Prints one JSON line: {"connect_ms": [...], "first_frame_ms": [...]}, each from
        before `create_session`.

    python livekit_clients.py hold BASE_URL API_KEY AGENT_ID CALLS SECONDS
        CALLS calls at once, each publishing a microphone of quiet noise (as the join-page bench's callers
        do) and receiving the agent's face and voice. Prints {"held": CALLS} once all have their first
        video frame, holds SECONDS, then {"frames": [...]} (video frames each received while held).
"""

import asyncio
import json
import os
import random
import sys
import time

from livekit import rtc
from trugen import TruGenClient

TIMEOUT = 60.0
RATE = 48_000
FRAME = RATE // 50  # 20 ms


async def join(client: TruGenClient, agent_id: str, who: str):
    session = await client.create_session(agent_id, {"user_name": who, "user_id": who}, {"disable_mic": True})
    await asyncio.wait_for(session.connect(), TIMEOUT)
    return session


async def joins(base_url: str, api_key: str, agent_id: str, count: str) -> None:
    client = TruGenClient(api_key=api_key, base_url=base_url)
    connect_ms, first_frame_ms = [], []
    for n in range(int(count)):
        started = time.monotonic()
        session = await join(client, agent_id, f"bench-{n}")
        connect_ms.append(round((time.monotonic() - started) * 1000, 1))
        await asyncio.wait_for(anext(session.video_frames()), TIMEOUT)
        first_frame_ms.append(round((time.monotonic() - started) * 1000, 1))
        await session.disconnect()
        await asyncio.sleep(0.5)
    print(json.dumps({"connect_ms": connect_ms, "first_frame_ms": first_frame_ms}), flush=True)


async def microphone(room: rtc.Room, stop: asyncio.Event) -> None:
    """Publishes a microphone and feeds it quiet noise in real time until `stop`."""
    source = rtc.AudioSource(RATE, 1)
    track = rtc.LocalAudioTrack.create_audio_track("mic", source)
    options = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
    await room.local_participant.publish_track(track, options)
    frame = rtc.AudioFrame.create(RATE, 1, FRAME)
    samples = frame.data
    try:
        while not stop.is_set():
            for i in range(FRAME):
                samples[i] = random.randint(-30, 30)
            await source.capture_frame(frame)
    finally:
        await source.aclose()


async def hold(base_url: str, api_key: str, agent_id: str, calls: str, seconds: str) -> None:
    client = TruGenClient(api_key=api_key, base_url=base_url)
    sessions = [await join(client, agent_id, f"held-{n}") for n in range(int(calls))]
    stop = asyncio.Event()
    frames = [0] * len(sessions)
    first = [asyncio.Event() for _ in sessions]

    async def watch(n: int, session) -> None:
        async for _ in session.video_frames():
            frames[n] += 1
            first[n].set()

    tasks = [asyncio.create_task(microphone(s.room, stop)) for s in sessions]
    tasks += [asyncio.create_task(watch(n, s)) for n, s in enumerate(sessions)]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in first)), TIMEOUT)
    print(json.dumps({"held": len(sessions)}), flush=True)
    before = list(frames)
    await asyncio.sleep(float(seconds))
    print(json.dumps({"frames": [a - b for a, b in zip(frames, before)]}), flush=True)
    stop.set()
    microphones, watchers = tasks[: len(sessions)], tasks[len(sessions) :]
    await asyncio.gather(*microphones, return_exceptions=True)
    for task in watchers:
        task.cancel()
    for session in sessions:
        await session.disconnect()


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    asyncio.run({"joins": joins, "hold": hold}[mode](*args))
    sys.stdout.flush()
    # Everything is said and every call hung up. The LiveKit SDK's native `livekit-audio` thread may
    # still run while the interpreter tears down, and then panics "in a function that cannot unwind",
    # aborting the process (seen now and then in CI): leave without the teardown.
    os._exit(0)
