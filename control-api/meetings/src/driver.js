// Drives a meeting platform's web client from an adapter (control-api/src/meetings/platforms): types the
// bot's name on the pre-join screen, asks to join, and says where the bot is. Installed in every page of
// the bot's browser before the platform's own scripts run; `poll` is called about four times a second.
(() => {
  if (window.__confabDriver) return;
  const visible = (el) => !!el && el.getClientRects().length > 0;
  const pageText = () => (document.body ? document.body.innerText : "").toLowerCase();
  const shows = (texts) => {
    const text = pageText();
    return texts.some((t) => text.includes(t.toLowerCase()));
  };
  const button = (label) => {
    const want = label.toLowerCase();
    return [...document.querySelectorAll("button, [role=button]")].find(
      (b) =>
        visible(b) &&
        !b.disabled &&
        ((b.innerText || "").trim().toLowerCase() === want || (b.getAttribute("aria-label") || "").toLowerCase() === want),
    );
  };
  const clickFirst = (labels) => {
    for (const label of labels) {
      const found = button(label);
      if (found) {
        found.click();
        return label;
      }
    }
    return null;
  };
  // Sets a field's value the way typing does (frameworks listen for input events, not the property).
  const type = (input, value) => {
    const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, "value").set;
    input.focus();
    setter.call(input, value);
    input.dispatchEvent(new Event("input", { bubbles: true }));
    input.dispatchEvent(new Event("change", { bubbles: true }));
  };
  let asked = false;
  window.__confabDriver = {
    poll(a, name, email) {
      if (!document.body) return { phase: "loading" };
      if (shows(a.removed_texts)) return { phase: "removed" };
      if (shows(a.ended_texts)) return { phase: "ended" };
      if (shows(a.refused_texts)) return { phase: "refused" };
      const leave = document.querySelector(a.in_call);
      if (leave && visible(leave)) {
        clickFirst(a.after_join);
        const speaker = document.querySelector(a.active_speaker);
        return {
          phase: "in_call",
          participants: document.querySelectorAll(a.participant).length,
          speaker: speaker ? speaker.innerText.trim() : null,
        };
      }
      if (shows(a.lobby_texts)) return { phase: "lobby" };
      clickFirst(a.before_join);
      const input = document.querySelector(a.name_input);
      if (input && visible(input)) {
        if (input.value !== name) type(input, name);
        const emailInput = a.email_input && email ? document.querySelector(a.email_input) : null;
        if (emailInput && emailInput.value !== email) type(emailInput, email);
        if (clickFirst(a.join_buttons)) asked = true;
        return { phase: "prejoin" };
      }
      return { phase: asked ? "joining" : "loading" };
    },
  };
})();
