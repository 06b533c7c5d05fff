-- Argo CD health of a VolumeLeftover (leftovers.dev/v1alpha1): one finding of the volume-leftovers
-- operator, which reports and never decides.
--
--   no status yet, or status.observedGeneration < metadata.generation   Progressing
--   state Open (or no state: an operator that predates acknowledgements) Degraded
--   state Expired (the acknowledgement's `until` has passed)            Degraded
--   state Superseded (acknowledged, but the finding changed since)      Degraded
--   state Acknowledged                                                  Healthy
--   any other state (a newer operator)                                  Unknown
--
-- Acknowledged is Healthy, not Suspended: someone has taken the finding on (spec.acknowledgement,
-- with its ticket), and nothing is paused or waiting to be resumed. Argo CD means Suspended for
-- resources that are paused (a suspended CronJob, a paused rollout), and ranks it worse than
-- Healthy when it sums up an Application (Healthy < Suspended < Progressing < Missing < Degraded <
-- Unknown): an Application holding a known, ticketed leftover would show "Suspended", which says
-- something untrue about the Application and keeps it from ever reading Healthy. The ticket is in
-- the message, and the operator turns the state to Expired (Degraded) when `until` passes.
--
-- Only the base and table libraries are used (no string, math or os), so the script runs the same
-- built in and as an argocd-cm override without useOpenLibs. It never reads the clock: the
-- operator decides when an acknowledgement has expired.

local function text(v)
  if type(v) == "string" and v ~= "" then
    return v
  end
  if type(v) == "number" then
    return tostring(v)
  end
  return nil
end

local function field(t, key)
  if type(t) == "table" then
    return t[key]
  end
  return nil
end

local hs = {}
local status = obj.status

if type(status) ~= "table" then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator"
  return hs
end

local generation = field(obj.metadata, "generation")
local observed = status.observedGeneration
if type(generation) == "number" and type(observed) == "number" and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator: generation " .. tostring(generation)
    .. " not observed yet (the status is of generation " .. tostring(observed) .. ")"
  return hs
end

local state = text(status.state)
local reason = text(status.reason)
if state == nil and reason == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator"
  return hs
end

-- "ClaimDeleted, 250Mi, class standard"
local summary = reason or "Unknown reason"
local capacity = text(status.capacity)
if capacity == nil and type(status.capacityBytes) == "number" then
  capacity = tostring(status.capacityBytes) .. " bytes"
end
if capacity ~= nil then
  summary = summary .. ", " .. capacity
end
local class = text(field(status.storageClass, "name"))
if class ~= nil then
  summary = summary .. ", class " .. class
end
-- "ClaimDeleted, 250Mi, class standard: <status.message>"
local finding = summary
local message = text(status.message)
if message ~= nil then
  finding = finding .. ": " .. message
end

-- The acknowledgement in force (spec), else the one the operator recorded when it saw it.
local acknowledged = field(status, "acknowledged")
local ack = field(obj.spec, "acknowledgement")
if type(ack) ~= "table" then
  ack = field(acknowledged, "acknowledgement")
end
local ticket = text(field(ack, "ticket"))
local ticketText = "no ticket"
if ticket ~= nil then
  ticketText = "ticket " .. ticket
end

if state == nil or state == "Open" then
  hs.status = "Degraded"
  hs.message = finding
  return hs
end

if state == "Acknowledged" then
  local parts = { ticketText }
  local by = text(field(ack, "by"))
  if by ~= nil then
    table.insert(parts, "by " .. by)
  end
  local untilTime = text(field(ack, "until"))
  if untilTime ~= nil then
    table.insert(parts, "until " .. untilTime)
  end
  local why = text(field(ack, "reason"))
  local head = "Acknowledged (" .. table.concat(parts, ", ")
  if why ~= nil then
    head = head .. "; " .. why
  end
  hs.status = "Healthy"
  hs.message = head .. "): " .. summary
  return hs
end

if state == "Expired" then
  local head = "Acknowledgement expired"
  local untilTime = text(field(ack, "until"))
  if untilTime ~= nil then
    head = head .. " " .. untilTime
  end
  hs.status = "Degraded"
  hs.message = head .. " (" .. ticketText .. "): " .. finding
  return hs
end

if state == "Superseded" then
  local oldReason = text(field(acknowledged, "reason"))
  local oldUID = text(field(acknowledged, "volumeUID"))
  local uid = text(field(obj.spec, "volumeUID"))
  local head
  if oldReason ~= nil and oldReason ~= reason then
    head = "Acknowledged as " .. oldReason .. " (" .. ticketText .. "), but the reason changed"
  elseif oldUID ~= nil and uid ~= nil and oldUID ~= uid then
    head = "Acknowledged for another volume of this name (uid " .. oldUID .. ", " .. ticketText
      .. "), but the volume was re-created"
  else
    head = "Acknowledged (" .. ticketText .. "), but the finding changed since"
  end
  hs.status = "Degraded"
  hs.message = head .. ": " .. finding
  return hs
end

hs.status = "Unknown"
hs.message = "Unknown state " .. state .. ": " .. finding
return hs
