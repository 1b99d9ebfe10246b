// The "dice" settings as the server sees them.
//
// VS Code keeps the client's own settings (how to start the server) in the same "dice"
// section as the server's; the server rejects keys it does not know with a message, so the
// client's keys are taken out of everything sent to it.

export const CLIENT_ONLY_SETTINGS: readonly string[] = ["serverPath", "interpreter", "tcp", "tokenFile"];

/** Settings that need a new server process when they change. */
export const RESTART_SETTINGS: readonly string[] = CLIENT_ONLY_SETTINGS;

export type SettingsObject = Record<string, unknown>;

/** The server's part of a "dice" section; anything that is not an object passes through. */
export function serverSettings(section: unknown): unknown {
  if (section === null || typeof section !== "object" || Array.isArray(section)) {
    return section;
  }
  const out: SettingsObject = {};
  for (const [key, value] of Object.entries(section as SettingsObject)) {
    if (!CLIENT_ONLY_SETTINGS.includes(key)) {
      out[key] = value;
    }
  }
  return out;
}

/**
 * A workspace/configuration answer with the client's keys removed from every "dice" item.
 * `sections` are the requested sections, in the order of `results`.
 */
export function serverConfigurationResults(sections: (string | undefined)[], results: unknown[]): unknown[] {
  return results.map((result, i) => {
    const section = sections[i];
    if (section === "dice") {
      return serverSettings(result);
    }
    if (section === undefined || section === "") {
      // The whole configuration: strip inside its "dice" member.
      if (result !== null && typeof result === "object" && "dice" in (result as SettingsObject)) {
        return { ...(result as SettingsObject), dice: serverSettings((result as SettingsObject).dice) };
      }
    }
    return result;
  });
}
