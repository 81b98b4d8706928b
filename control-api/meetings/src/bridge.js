// The bot's media inside the meeting page. What the meeting plays (every remote audio track of the page's
// RTCPeerConnections, mixed with WebAudio) becomes the microphone of the agent's own call to Confab; the
// agent's voice and face coming back on that call become the microphone and camera the meeting page gets
// from getUserMedia. The agent's call is an ordinary WebRTC call to this Confab (the worker hands its
// offer to the media worker and the answer back), so turn-taking, recording and events are a 1:1 call's.
(() => {
  if (window.__confab) return;
  const NativePeer = window.RTCPeerConnection;
  let ctx = null;
  let meetingMix = null; // what the meeting says -> Confab
  let agentVoice = null; // what the agent says -> the meeting
  const sinks = []; // muted media elements: Chromium feeds remote audio to WebAudio only while one plays it
  const audio = () => {
    if (!ctx) {
      ctx = new AudioContext({ sampleRate: 48000 });
      meetingMix = ctx.createMediaStreamDestination();
      agentVoice = ctx.createMediaStreamDestination();
      // A destination nothing plays into is not rendered, and its track sends no packets at all: a
      // silent source keeps both flowing (a quiet meeting is still a meeting).
      for (const destination of [meetingMix, agentVoice]) {
        const silence = ctx.createConstantSource();
        silence.offset.value = 0;
        silence.connect(destination);
        silence.start();
      }
    }
    if (ctx.state !== "running") ctx.resume().catch(() => {});
    return ctx;
  };
  const intoMix = (track, destination) => {
    const stream = new MediaStream([track]);
    const sink = new Audio();
    sink.muted = true;
    sink.srcObject = stream;
    sink.play().catch(() => {});
    sinks.push(sink);
    audio().createMediaStreamSource(stream).connect(destination);
  };
  const heard = new Set();
  let confab = null;
  function Peer(...args) {
    const peer = new NativePeer(...args);
    peer.addEventListener("track", (event) => {
      if (event.track.kind !== "audio" || heard.has(event.track.id)) return;
      heard.add(event.track.id);
      audio();
      intoMix(event.track, meetingMix);
    });
    return peer;
  }
  Peer.prototype = NativePeer.prototype;
  Object.setPrototypeOf(Peer, NativePeer);
  window.RTCPeerConnection = Peer;
  window.webkitRTCPeerConnection = Peer;

  // The camera: a canvas showing the agent's face once its call is up.
  const canvas = document.createElement("canvas");
  canvas.width = 512;
  canvas.height = 512;
  let face = null;
  let camera = null;
  setInterval(() => {
    const g = canvas.getContext("2d");
    if (face && face.readyState >= 2) g.drawImage(face, 0, 0, canvas.width, canvas.height);
    else {
      g.fillStyle = "#20232a";
      g.fillRect(0, 0, canvas.width, canvas.height);
    }
  }, 40);
  const devices = [
    { deviceId: "confab-voice", kind: "audioinput", label: "Confab agent voice", groupId: "confab" },
    { deviceId: "confab-face", kind: "videoinput", label: "Confab agent face", groupId: "confab" },
    { deviceId: "default", kind: "audiooutput", label: "Confab", groupId: "confab" },
  ].map((d) => ({ ...d, toJSON() { return d; } }));
  navigator.mediaDevices.enumerateDevices = async () => devices;
  navigator.mediaDevices.getUserMedia = async (constraints) => {
    audio();
    const tracks = [];
    if (constraints && constraints.audio) tracks.push(agentVoice.stream.getAudioTracks()[0].clone());
    if (constraints && constraints.video) {
      if (!camera) camera = canvas.captureStream(25);
      tracks.push(camera.getVideoTracks()[0].clone());
    }
    return new MediaStream(tracks);
  };

  const gathered = (peer, ms) =>
    new Promise((resolve) => {
      if (peer.iceGatheringState === "complete") return resolve();
      peer.addEventListener("icegatheringstatechange", () => {
        if (peer.iceGatheringState === "complete") resolve();
      });
      setTimeout(resolve, ms);
    });

  window.__confab = {
    // The agent's call: returns its SDP offer (candidates gathered); `accept` takes Confab's answer.
    async offer() {
      audio();
      if (confab) confab.close();
      confab = new NativePeer({ iceServers: [] });
      confab.addTransceiver(meetingMix.stream.getAudioTracks()[0], { direction: "sendrecv" });
      confab.addTransceiver("video", { direction: "recvonly" });
      confab.ontrack = (event) => {
        if (event.track.kind === "audio") intoMix(event.track, agentVoice);
        else {
          face = document.createElement("video");
          face.muted = true;
          face.playsInline = true;
          face.srcObject = new MediaStream([event.track]);
          face.play().catch(() => {});
        }
      };
      await confab.setLocalDescription(await confab.createOffer());
      await gathered(confab, 3000);
      return confab.localDescription.sdp;
    },
    async accept(sdp) {
      await confab.setRemoteDescription({ type: "answer", sdp });
      return true;
    },
    // The agent's call ("new", "connecting", "connected", "disconnected", "failed", "closed"), the page's
    // audio ("running", "suspended"), and how many of the meeting's audio tracks are heard.
    state: () => ({
      call: confab ? confab.connectionState : "new",
      audio: ctx ? ctx.state : "none",
      meeting_tracks: heard.size,
    }),
    close() {
      if (confab) confab.close();
    },
  };
})();
