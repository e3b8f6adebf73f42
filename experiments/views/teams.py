from functools import wraps

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from experiments.forms.teams import AddMemberForm, InvitationSignUpForm, RoleForm, TeamForm
from experiments.middleware import SESSION_KEY
from experiments.models import Invitation, Membership
from experiments.presentation.costs import costs_total, money
from experiments.selectors.device_time import team_device_seconds_by_month
from experiments.selectors.studies import team_recent_studies
from experiments.selectors.teams import (
    dashboard_data,
    invitations_for_user,
    team_members,
    team_membership,
    team_open_invitation,
    team_open_invitations,
    user_membership,
)
from experiments.services.invitation_mail import invitation_send_email
from experiments.services.invitations import (
    InvitationError,
    invitation_accept,
    invitation_accept_mine,
    invitation_decline,
    invitation_for_token,
    invitation_invite,
    invitation_sign_up,
    invitation_withdraw,
)
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.memberships import membership_choose, membership_leave, membership_remove, membership_set_role
from experiments.services.teams import TeamError, team_create
from experiments.tuning.bounds import parse_id
from experiments.views.access import forbidden, found_or_404, team_required
from experiments.views.audit import audit_context
from experiments.views.notifications import notifications_context

# The link of an invitation just made, shown once on the next team page and then forgotten.
NEW_LINK_KEY = "new_invitation_link"


def owner_required(view):
    """Only the team's owners add, change and remove members; others see the member list."""

    @team_required
    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.membership.role != Membership.Role.OWNER:
            return forbidden(request, "Only the team's owners can add, change or remove members; ask an owner.")
        return view(request, *args, **kwargs)

    return wrapped


def _get_membership_for_user(request, membership_id: int) -> Membership:
    return found_or_404(team_membership(team=request.team, membership_id=membership_id), Membership)


def _get_invitation_for_user(request, invitation_id: int) -> Invitation:
    return found_or_404(team_open_invitation(team=request.team, invitation_id=invitation_id), Invitation)


def _first_error(form: forms.Form) -> str:
    return " ".join(error for errors in form.errors.values() for error in errors)


@login_required
@require_POST
def switch_team(request):
    team_id = parse_id(request.POST.get("team"))  # a tampered or empty value: no such team, not a 500
    membership = user_membership(user=request.user, team_id=team_id) if team_id else None
    if membership is None:
        raise Http404("No such team.")
    membership_choose(membership=membership)
    request.session[SESSION_KEY] = membership.team_id
    return redirect("dashboard")


@team_required
def dashboard(request):
    studies = team_recent_studies(team=request.team)
    return render(request, "dashboard.html", {"studies": studies,
                                              **dashboard_data(team=request.team, kinds=JOB_KINDS.values()),
                                              "invitations": invitations_for_user(user=request.user)})


@login_required
@require_POST
def invitation_answer(request, invitation_id: int, answer: str):
    """Accept or decline, from the dashboard, an invitation addressed to this account."""
    try:
        if answer == "accept":
            membership, created = invitation_accept_mine(invitation_id=invitation_id, user=request.user)
            return _joined(request, membership, created)
        invitation = invitation_decline(invitation_id=invitation_id, user=request.user)
    except InvitationError as exc:
        if exc.status == 404:  # not addressed to this account: as if it did not exist
            raise Http404(str(exc)) from None
        messages.error(request, str(exc))
    else:
        messages.info(request, f"You declined the invitation to {invitation.team.name}.")
    return redirect("dashboard")


def _priced(months: list[dict]) -> list[dict]:
    for row in months:
        row["cost"] = money(costs_total(row["by_kind"]))
    return months


@team_required
def team_settings(request):
    is_owner = request.membership.role == Membership.Role.OWNER
    new_link = request.session.pop(NEW_LINK_KEY, None)
    if not is_owner or (new_link or {}).get("team_id") != request.team.id:
        new_link = None
    members = team_members(team=request.team)
    invitations = team_open_invitations(team=request.team) if is_owner else Invitation.objects.none()
    audit = audit_context(request) if is_owner else {}
    return render(request, "teams/settings.html", {
        "is_owner": is_owner, "members": members, "invitations": invitations, "new_link": new_link,
        "add_form": AddMemberForm(), "roles": Membership.Role.choices,
        "owners": sum(1 for m in members if m.role == Membership.Role.OWNER),
        "invitation_days": settings.INVITATION_DAYS, **notifications_context(request), **audit,
        "device_months": _priced(team_device_seconds_by_month(team=request.team, kinds=JOB_KINDS.values())),
        "priced": bool(settings.DEVICE_HOUR_PRICES),
    })


@owner_required
@require_POST
def team_member_add(request):
    """Invite someone. The answer is the same whether or not they have an account here."""
    form = AddMemberForm(request.POST)
    if not form.is_valid():
        messages.error(request, _first_error(form))
        return redirect("team_settings")
    try:
        invited = invitation_invite(team=request.team, identifier=form.cleaned_data["identifier"],
                                    role=form.cleaned_data["role"], invited_by=request.user)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("team_settings")
    invitation = invited.invitation
    link = request.build_absolute_uri(reverse("invitation_accept", args=[invited.token]))
    how = invitation_send_email(invitation=invitation, link=link)
    request.session[NEW_LINK_KEY] = {"team_id": request.team.id, "invitee": invitation.invitee, "link": link}
    messages.success(request, f"Invitation for {invitation.invitee} as {invitation.role} made. If they have an "
                              f"account here, they find it on their dashboard; nobody joins until they accept. {how}")
    return redirect("team_settings")


@owner_required
@require_POST
def team_member_role(request, membership_id: int):
    membership = _get_membership_for_user(request, membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, _first_error(form))
        return redirect("team_settings")
    try:
        membership = membership_set_role(membership=membership, role=form.cleaned_data["role"])
    except TeamError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{membership.user.get_username()} is now {membership.role}.")
    return redirect("team_settings")


@owner_required
@require_POST
def team_member_remove(request, membership_id: int):
    membership = _get_membership_for_user(request, membership_id)
    try:
        membership_remove(membership=membership)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("team_settings")
    if membership.user_id == request.user.pk:
        messages.success(request, f"You left {membership.team.name}.")
        return redirect("dashboard")
    messages.success(request, f"{membership.user.get_username()} was removed from {membership.team.name}.")
    return redirect("team_settings")


@owner_required
@require_POST
def team_invitation_withdraw(request, invitation_id: int):
    invitation = _get_invitation_for_user(request, invitation_id)
    invitation_withdraw(invitation=invitation)
    messages.success(request, f"The invitation of {invitation.invitee} was withdrawn; its link no longer works.")
    return redirect("team_settings")


@team_required
@require_POST
def team_leave(request):
    team = request.team
    try:
        membership_leave(team=team, user=request.user)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("team_settings")
    request.session.pop(SESSION_KEY, None)
    messages.success(request, f"You left {team.name}.")
    return redirect("dashboard")


@login_required
def team_new(request):
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            team = team_create(name=form.cleaned_data["name"], owner=request.user)
        except TeamError as exc:
            form.add_error("name", str(exc))
        else:
            request.session[SESSION_KEY] = team.id
            messages.success(request, f"Team {team.name} created; you are its owner. Add people below.")
            return redirect("team_settings")
    return render(request, "teams/new.html", {"form": form})


def invitation_accept_view(request, token: str):
    """The link from an invitation: whoever holds it may sign up or log in and accept (an invitation
    by username: only that account). Opening it joins nobody; the button does."""
    try:
        invitation = invitation_for_token(token)
    except InvitationError as exc:
        return render(request, "teams/invitation_invalid.html", {"problem": str(exc)}, status=exc.status)
    form = None
    if request.user.is_authenticated:
        if request.method == "POST":
            try:
                membership, created = invitation_accept(token=token, user=request.user)
            except InvitationError as exc:
                return render(request, "teams/invitation_invalid.html", {"problem": str(exc)}, status=exc.status)
            return _joined(request, membership, created)
    elif invitation.email:  # an invitation by username is answered by that account only, once logged in
        form = InvitationSignUpForm(request.POST or None, email=invitation.email)
        if request.method == "POST" and form.is_valid():
            try:
                user, membership = invitation_sign_up(token=token, username=form.cleaned_data["username"],
                                                      password=form.cleaned_data["password1"])
            except InvitationError as exc:
                return render(request, "teams/invitation_invalid.html", {"problem": str(exc)}, status=exc.status)
            except TeamError as exc:
                form.add_error("username", str(exc))
            else:
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return _joined(request, membership, True)
    return render(request, "teams/invitation.html", {"invitation": invitation, "form": form})


def _joined(request, membership: Membership, created: bool):
    request.session[SESSION_KEY] = membership.team_id
    if created:
        messages.success(request, f"Welcome to {membership.team.name}: you joined as {membership.role}.")
    else:
        messages.info(request, f"You are already a member of {membership.team.name} ({membership.role}); "
                               "your role is unchanged.")
    return redirect("dashboard")
